//! Chat templates are downloaded with a model and are hostile input: each
//! test builds a template that would hang, exhaust memory or abort the
//! process, shows it refused (or contained) quickly with an error naming
//! where the template came from, then renders a real template in the same
//! process.

use crate::support::assert_memory_bounded;
use candle_core::quantized::gguf_file::{Content, Value as GgufValue, VersionedMagic};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use verifine_models::{ChatTemplate, Message, ModelError, Role};

/// SmolLM2's template.
const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Generous: every refusal here takes milliseconds (the deadline case
/// about three seconds); only a hang or a swap storm takes longer.
const QUICK: Duration = Duration::from_secs(10);

fn conversation() -> Vec<Message> {
    vec![
        Message::new(Role::System, "Be brief."),
        Message::new(Role::User, "What is 2 + 2?"),
        Message::new(Role::Assistant, "4"),
        Message::new(Role::User, "And 3 + 3?"),
    ]
}

/// A good template still renders, exactly, in the process that refused.
fn still_renders() {
    let template = ChatTemplate::new(CHATML, "", "<|im_end|>").unwrap();
    let text = template
        .render(&[Message::new(Role::User, "hi")], true)
        .unwrap();
    assert_eq!(
        text,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    );
}

/// Compiles and renders `source` as `origin`, expecting a [`ModelError::Limit`]
/// naming `origin` and containing `words`, within [`QUICK`].
fn refused(source: &str, words: &str) -> String {
    let origin = "model.gguf: tokenizer.chat_template";
    let start = Instant::now();
    let result = ChatTemplate::from_source(origin, source, "<s>", "</s>")
        .and_then(|t| t.render(&conversation(), true));
    let elapsed = start.elapsed();
    let error = match result {
        Err(error @ ModelError::Limit { .. }) => error.to_string(),
        other => panic!("{source:?} was not refused at a limit: {other:?}"),
    };
    assert!(
        error.starts_with(&format!("{origin}: ")),
        "{error} does not name the template's origin"
    );
    assert!(error.contains(words), "{error:?} lacks {words:?}");
    assert!(elapsed < QUICK, "{source:?} took {elapsed:?}");
    assert_memory_bounded();
    still_renders();
    error
}

#[test]
fn nested_loops_run_out_of_fuel() {
    refused(
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
        "MAX_RENDER_FUEL",
    );
    refused(
        "{% for m in messages %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endfor %}",
        "MAX_RENDER_FUEL",
    );
}

#[test]
fn repeated_strings_and_lists_are_refused_before_they_are_made() {
    // Folded by minijinja's compiler: refused before compiling.
    refused("{{ 'x' * 100000000 }}", "MAX_VALUE_SIZE");
    refused(
        "{{ [1, 2] * 1000000000000 == [1, 2] * 1000000000000 }}",
        "MAX_VALUE_SIZE",
    );
    refused(
        "{{ ('ab' * 1000000) ~ ('ab' * 1000000) ~ ('ab' * 1000000) }}",
        "MAX_VALUE_SIZE",
    );
    // Computed at render time.
    refused("{% set n = 100000000 %}{{ 'x' * n }}", "MAX_VALUE_SIZE");
    refused(
        "{% set n = 10 ** 15 %}{{ ([0] * n) | length }}",
        "MAX_VALUE_SIZE",
    );
    refused(
        "{% set n = 10 ** 15 %}{{ '' ~ (messages * n) }}",
        "MAX_VALUE_SIZE",
    );
    refused(
        "{% set l = messages * 100000 %}{{ l ~ l }}",
        "MAX_VALUE_SIZE",
    );
}

#[test]
fn doubling_by_concatenation_stops_at_the_value_limit() {
    refused(
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
        "MAX_VALUE_SIZE",
    );
    refused(
        "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}",
        "MAX_VALUE_SIZE",
    );
    // Many copies, each under the value limit: the render's work runs out.
    refused(
        "{% set ns = namespace(l=[]) %}{% set s = messages[0].content * 300000 %}{% for i in range(1000) %}{% set ns.l = [s ~ i] %}{% endfor %}",
        "MAX_RENDER_WORK",
    );
    // Captured raw text, the same.
    let raw = "x".repeat(10_000);
    refused(
        &format!(
            "{{% set c %}}{{% for i in range(100000) %}}{raw}{{% endfor %}}{{% endset %}}{{{{ c | length }}}}"
        ),
        "MAX_RENDER_WORK",
    );
}

#[test]
fn widths_and_counts_are_capped() {
    refused("{{ messages | tojson(indent=1000000000) }}", "MAX_WIDTH");
    refused("{{ 'a\nb' | indent(1000000000) }}", "MAX_WIDTH");
    refused("{{ 'a\nb' | indent(width=1000000000) }}", "MAX_WIDTH");
    refused("{{ 'x'.center(1000000000) }}", "MAX_WIDTH");
    refused("{{ 'x'.ljust(1000000000, '-') }}", "MAX_WIDTH");
    refused("{{ '%1000000000d' | format(1) }}", "MAX_WIDTH");
    refused("{{ '%.1000000000f' | format(1.5) }}", "MAX_WIDTH");
    refused("{{ '%(a)1000000000s' | format(a='x') }}", "MAX_WIDTH");
    refused("{{ '{:>1000000000}'.format('x') }}", "MAX_WIDTH");
    refused("{{ [1] | batch(1000000000000) }}", "MAX_WIDTH");
    refused("{{ [1] | slice(1000000000000) }}", "MAX_WIDTH");
    // Within the width, the output it implies is checked before it is made.
    refused(
        "{% set s = '\n' * 1000000 %}{{ s | indent(9000) | length }}",
        "MAX_VALUE_SIZE",
    );
}

#[test]
fn growth_through_replace_and_join_is_refused() {
    refused(
        "{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}{% set ns.s = ns.s.replace('a', 'aaaa') %}{% endfor %}",
        "MAX_VALUE_SIZE",
    );
    refused(
        "{% set ns = namespace(s='abc') %}{% for i in range(40) %}{% set ns.s = ns.s | replace('', '12345678') %}{% endfor %}",
        "MAX_VALUE_SIZE",
    );
    refused("{{ range(100000) | join('x' * 100000) }}", "MAX_VALUE_SIZE");
    refused("{{ ('x' * 100000).join(range(100000)) }}", "MAX_VALUE_SIZE");
}

#[test]
fn recursion_is_bounded_without_exhausting_the_stack() {
    // A small thread stack, like a test's or a worker's.
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            refused(
                "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
                "MAX_RECURSION",
            );
            refused(
                "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(18) }}",
                "MAX_RENDER_FUEL",
            );
            refused(
                "{% for m in [messages] recursive %}{{ loop([m]) }}{% endfor %}",
                "MAX_RECURSION",
            );
            refused(
                "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}",
                "MAX_VALUE_DEPTH",
            );
            // A namespace that holds itself is stored as a copy, never a cycle.
            let template = ChatTemplate::new(
                "{% set ns = namespace(a=1) %}{% set ns.me = ns %}{% set ns.l = [ns] %}{{ ns.me.a }}{{ ns == ns }}{{ ns.l | length }}",
                "",
                "",
            )
            .unwrap();
            assert_eq!(template.render(&[], false).unwrap(), "1True1");
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn work_that_grows_with_its_inputs_is_paid_for() {
    // Each test or strip scans a long string once per item.
    refused(
        "{% set s = 'ab' * 1000000 %}{{ (range(100000) | map('string') | list) | select('in', s) | list | length }}",
        "MAX_RENDER_WORK",
    );
    refused(
        "{% set s = 'a' * 1000000 %}{% set c = 'b' * 1000000 %}{{ s.strip(c ~ 'a') | length }}",
        "MAX_RENDER_WORK",
    );
    // Comparisons make nothing: the deadline stops them.
    refused(
        "{% set s = 'ab' * 1000000 %}{% set t = s ~ '' %}{% for i in range(100000) %}{% if s == t %}{% endif %}{% endfor %}",
        "MAX_RENDER_TIME",
    );
}

#[test]
fn templates_too_large_or_loading_others_are_refused() {
    let huge = "x".repeat(verifine_models::chat::MAX_TEMPLATE_BYTES + 1);
    refused(&huge, "MAX_TEMPLATE_BYTES");
    let error =
        ChatTemplate::from_source("t.jinja", "{% include 'chat_template' %}", "", "").unwrap_err();
    assert!(matches!(error, ModelError::Template { .. }), "{error:?}");
    assert!(error.to_string().starts_with("t.jinja: include"), "{error}");
    still_renders();
}

#[test]
fn errors_name_the_file_and_field_the_template_came_from() {
    let dir = verifine_test_support::scratch_dir("models-hostile-template");
    let config = dir.join("tokenizer_config.json");
    let hostile =
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    std::fs::write(
        &config,
        serde_json::json!({"chat_template": hostile}).to_string(),
    )
    .unwrap();
    let template = ChatTemplate::from_checkpoint_dir(&dir).unwrap().unwrap();
    let error = template
        .render(&conversation(), true)
        .unwrap_err()
        .to_string();
    let origin = format!("{}: chat_template: ", config.display());
    assert!(error.starts_with(&origin), "{error}");
    assert!(error.contains("MAX_RENDER_FUEL"), "{error}");

    std::fs::write(
        &config,
        serde_json::json!({"chat_template": "{{ 'x' * 100000000 }}"}).to_string(),
    )
    .unwrap();
    let error = ChatTemplate::from_checkpoint_dir(&dir)
        .unwrap_err()
        .to_string();
    assert!(error.starts_with(&origin), "{error}");

    let path = dir.join("model.gguf");
    let content = Content {
        magic: VersionedMagic::GgufV3,
        metadata: HashMap::from([(
            "tokenizer.chat_template".to_string(),
            GgufValue::String("{{ messages | tojson(indent=100000000000) }}".into()),
        )]),
        tensor_infos: HashMap::new(),
        tensor_data_offset: 0,
    };
    let template = ChatTemplate::from_gguf(&content, &path, "", "")
        .unwrap()
        .unwrap();
    let error = template
        .render(&conversation(), true)
        .unwrap_err()
        .to_string();
    let origin = format!("{}: tokenizer.chat_template: ", path.display());
    assert!(error.starts_with(&origin), "{error}");
    assert!(error.contains("MAX_WIDTH"), "{error}");
    still_renders();
}
