//! The bounds on chat templates (chat::bounds) change nothing for real
//! templates: each renders exactly as the same minijinja environment
//! without guards renders it, over short and long conversations.

use minijinja::{Environment, Error, ErrorKind, context};
use verifine_models::{ChatTemplate, Message, Role};

const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

const QWEN2: &str = r#"{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"#;

const LLAMA3: &str = r#"{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"#;

const GEMMA3: &str = r#"{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"#;

const DEEPSEEK_R1: &str = "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and message['content'] is not none %}{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}{% if add_generation_prompt and not ns.is_tool %}{{'<｜Assistant｜><think>\\n'}}{% endif %}";

const QWEN3: &str = r#"{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system") %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if '</think>' in content %}
            {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"#;

/// Exercises what the guards wrap: macros, captures, filters with widths,
/// string methods, list building in a namespace, slicing, `format`.
const FEATURES: &str = r#"{%- macro turn(role, text, n) -%}
[{{ '%03d' | format(n) }}] {{ role | upper }}: {{ text | indent(2) }}
{%- endmacro -%}
{%- set ns = namespace(roles=[], total=0) -%}
{%- for m in messages -%}
    {%- set ns.roles = ns.roles + [m.role] -%}
    {%- set ns.total = ns.total + m.content | length -%}
    {{ turn(m.role, m.content.replace('2', 'two'), loop.index) }}
{% endfor -%}
{%- set summary %}{{ ns.roles | join(', ') }} / {{ ns.total }}{% endset -%}
{{ summary }}
{{ '{:>6}|{:<4}|'.format('ab', 'c') }}{{ ns.roles[1:] | batch(2) | list }}{{ messages[-1].content.split()[::-1] | join(' ') }}
{{ (ns.roles * 2) | length }}{{ ('-' * 10) ~ (messages | map(attribute='role') | select('equalto', 'user') | list | length) }}
{%- if add_generation_prompt %}{{ eos_token }}{% endif -%}"#;

/// Control flow the rewritten program must keep: blocks, call blocks,
/// recursive loops, `break`/`continue`, loop `else`, `with`, filter
/// blocks, the loop object, tests, dicts.
const CONTROL_FLOW: &str = r#"{%- block head -%}[{{ messages | length }}]{%- endblock -%}
{%- macro wrap(tag) -%}<{{ tag }}>{{ caller() }}</{{ tag }}>{%- endmacro -%}
{%- call wrap('turns') -%}
{%- for m in messages if m.role != 'system' -%}
    {%- if loop.index > 6 %}{% break %}{% endif -%}
    {%- if m.content is none or m.content == '' %}{% continue %}{% endif -%}
    {{ loop.cycle('a', 'b') }}{{ loop.changed(m.role) }}{{ loop.previtem.role if loop.previtem else '-' }}:{{ m.content[:12] }};
{%- else -%}none
{%- endfor -%}
{%- endcall -%}
{%- for item in [[1, [2, [3]]], 4] recursive -%}
    {%- if item is iterable %}({{ loop(item) }}){% else %}{{ item }}{% endif -%}
{%- endfor -%}
{%- with d = {'k': messages[0].role, 'n': 2 ** 10, 'f': 7 // 2, 'm': 7 % 3} -%}
{%- for key, value in d | items %} {{ key }}={{ value }}{% endfor -%}
{%- endwith -%}
{%- filter upper %} shout {{ 'quiet' if add_generation_prompt else 'loud' }}{% endfilter -%}
{%- set ns = namespace(n=0) -%}
{%- for m in messages -%}{%- set ns.n = ns.n + (1 if m.role is in ['user', 'assistant'] else 0) -%}{%- endfor -%}
 {{ ns.n }} {{ messages | map(attribute='role') | unique | list }} {{ messages[-2:] | map(attribute='role') | join('/') }}
{{- ' ' ~ (messages | selectattr('role', 'equalto', 'user') | list | length) ~ ' ' ~ ('%.2f' | format(3.14159)) -}}"#;

/// The same environment as ChatTemplate's, without guards or bounds.
fn unbounded(
    source: &str,
    messages: &[Message],
    add_generation_prompt: bool,
) -> Result<String, Error> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<String, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        },
    );
    env.render_str(
        source,
        context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => "<s>",
            eos_token => "</s>",
        },
    )
}

fn conversations() -> Vec<Vec<Message>> {
    let short = vec![
        Message::new(Role::System, "  Be brief, and answer in words.  "),
        Message::new(Role::User, "What is 2 + 2?\nThink first."),
        Message::new(
            Role::Assistant,
            "<think>\n2 and 2 make 4.\n</think>\n\nFour.",
        ),
        Message::new(Role::User, "And 3 + 3? Ünïcödé ✓"),
    ];
    let mut long = vec![Message::new(Role::System, "You count.")];
    for i in 0..1000 {
        long.push(Message::new(Role::User, format!("{i} + 1?")));
        long.push(Message::new(
            Role::Assistant,
            format!("<think>{i}</think>{}", i + 1),
        ));
    }
    long.push(Message::new(Role::User, "Done?"));
    let alternating_wrongly = vec![Message::new(Role::User, "a"), Message::new(Role::User, "b")];
    vec![short, long, alternating_wrongly]
}

#[test]
fn real_templates_render_exactly_as_without_bounds() {
    let templates = [
        ("smollm2", SMOLLM2),
        ("qwen2", QWEN2),
        ("llama3", LLAMA3),
        ("gemma3", GEMMA3),
        ("deepseek-r1", DEEPSEEK_R1),
        ("qwen3", QWEN3),
        ("features", FEATURES),
        ("control-flow", CONTROL_FLOW),
    ];
    for (name, source) in templates {
        let mut rendered = 0;
        let template = ChatTemplate::from_source(name, source, "<s>", "</s>").unwrap();
        for messages in conversations() {
            for add_generation_prompt in [false, true] {
                let expected = unbounded(source, &messages, add_generation_prompt);
                let got = template.render(&messages, add_generation_prompt);
                match (expected, got) {
                    (Ok(expected), Ok(got)) => {
                        assert_eq!(got, expected, "{name}");
                        rendered += 1;
                    }
                    (Err(expected), Err(got)) => {
                        let detail = expected.detail().unwrap_or_default().to_string();
                        assert!(
                            got.to_string().contains(&detail),
                            "{name}: {got} vs {expected}"
                        );
                    }
                    (expected, got) => panic!("{name}: {got:?} where unbounded gave {expected:?}"),
                }
            }
        }
        // Both good conversations render, with and without the prompt.
        assert!(rendered >= 4, "{name} rendered {rendered}");
    }
}
