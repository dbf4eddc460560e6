//! Templates written in the package's format (checked in here, not
//! downloaded), hostile ones, and one ignored test over the real 100.

use super::number::{Kind, Number, Ratio};
use super::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The package's template 0001 (a fog bank), as it ships.
const FOG: &str = r#"
question = "A fog bank rolls in from the ocean to cover a city. It takes 10 minutes to cover every 3 miles of the city. If the city is 42 miles across from the oceanfront to the opposite inland edge, how many minutes will it take for the fog bank to cover the whole city?"

answer = """
The city will be covered in 42/3 = <<42/3=14>>14 intervals of 10 minutes.
Thus, it will take 14 * 10 = <<14*10=140>>140 minutes for the fog to cover the whole city.
#### 140
"""

id_orig = 103

question_annotated = """
A fog bank rolls in from the ocean to cover a city. It takes {t,10} minutes to cover every {d,3} miles of the city. If the city is {y,42} miles across from the oceanfront to the opposite inland edge, how many minutes will it take for the fog bank to cover the whole city?

#init:
- $t = range(2, 500)
- $d = range(2, 100)
- $y=range(2, 100)

#conditions:
- is_int(y/d)

#answer: y//d*t
"""

answer_annotated = """
The city will be covered in {y}/{d} = <<{y}/{d}={y//d}>>{y//d} intervals of {t} minutes.
#### {y//d*t}
"""
"#;

const LISTS: &str = r#"{"names": ["Sophie", "Noah", "Ava"], "multi_times": [["twice", 2], ["thrice", 3]],
    "fractions": ["1/2", "1/4"], "numbers": ["one", "two", "three", "four", "five"]}"#;

/// A template in the package's layout from its parts.
pub(super) fn template(
    question: &str,
    init: &str,
    conditions: &str,
    answer: &str,
    original: &str,
) -> String {
    format!(
        "question = \"-\"\nanswer = \"\"\"\nworked\n#### {original}\n\"\"\"\n\nquestion_annotated = \"\"\"\n{question}\n\n\
         #init:\n{init}\n\n#conditions:\n{conditions}\n\n#answer: {answer}\n\"\"\"\n\n\
         answer_annotated = \"\"\"\nworked\n#### {{{answer}}}\n\"\"\"\n"
    )
}

fn lists() -> Lists {
    Lists::from_json("lists", LISTS).unwrap()
}

fn read(text: &str) -> Result<Template, SymbolicError> {
    Template::read("test.toml", text, &lists())
}

fn draw(text: &str, seed: u64, n: usize) -> Result<Vec<Problem>, SymbolicError> {
    variants(&read(text)?, &mut SplitMix64::new(seed), n)
}

/// The numbers of a prompt, in order.
fn numbers(prompt: &str) -> Vec<i64> {
    prompt
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

#[test]
fn variables_are_substituted_and_conditions_honoured() {
    let problems = draw(FOG, 7, 200).unwrap();
    for p in &problems {
        let [t, d, y] = numbers(&p.prompt)[..] else {
            panic!("{}", p.prompt)
        };
        assert!(
            (2..500).contains(&t) && (2..100).contains(&d) && (2..100).contains(&y),
            "{}",
            p.prompt
        );
        assert_eq!(y % d, 0, "the condition holds: {}", p.prompt);
        assert_eq!(p.answer, y / d * t);
        assert_eq!(p.solution, format!("#### {}", p.answer));
        assert!(!p.prompt.contains('{'), "{}", p.prompt);
    }
    let distinct: std::collections::HashSet<_> = problems.iter().map(|p| &p.prompt).collect();
    assert!(distinct.len() > 150, "variants vary");
}

#[test]
fn the_same_seed_gives_the_same_variants() {
    assert_eq!(draw(FOG, 3, 20).unwrap(), draw(FOG, 3, 20).unwrap());
    assert_ne!(draw(FOG, 3, 20).unwrap(), draw(FOG, 4, 20).unwrap());
    // A stream continues: two calls draw what one call of both draws.
    let template = read(FOG).unwrap();
    let mut rng = SplitMix64::new(3);
    let mut two = variants(&template, &mut rng, 10).unwrap();
    two.extend(variants(&template, &mut rng, 10).unwrap());
    assert_eq!(two, draw(FOG, 3, 20).unwrap());
}

#[test]
fn the_original_problem_is_rebuilt_and_answered() {
    let template = read(FOG).unwrap();
    let original = template.original().unwrap();
    assert_eq!(original.answer, 140);
    assert_eq!(Some(original.prompt.as_str()), template.original_question());
    assert_eq!(template.original_answer(), Some("140"));
}

#[test]
fn lists_tuples_and_hidden_values_are_handled() {
    // `k_txt` is shown, `k` hidden: drawn together, recovered together.
    let text = template(
        "{name,Ava} reads {k_txt,three} books {m_txt,twice} a week and {frac,1/2} of {n,10} pages.",
        "- name = sample(names)\n- k_txt, k = range_str(2, 5, 1, numbers)\n- m_txt, m = sample(multi_times)\n\
         - $frac = sample(fractions)\n- $n = range(4, 40, 4)",
        "- is_int(n * frac)",
        "k * m + int(n * frac)",
        "11",
    );
    let template = read(&text).unwrap();
    let original = template.original().unwrap();
    assert_eq!(
        original.prompt,
        "Ava reads three books twice a week and 1/2 of 10 pages."
    );
    assert_eq!(original.answer, 3 * 2 + 5);
    for p in variants(&template, &mut SplitMix64::new(1), 100).unwrap() {
        let words = ["one", "two", "three", "four", "five"];
        let k = words
            .iter()
            .position(|w| p.prompt.contains(&format!(" {w} books")))
            .unwrap() as i64
            + 1;
        assert!(
            (2..5).contains(&k),
            "range_str's end is excluded: {}",
            p.prompt
        );
        let m = if p.prompt.contains("twice") { 2 } else { 3 };
        let [num, den, n] = numbers(&p.prompt)[..] else {
            panic!("{}", p.prompt)
        };
        assert_eq!(n * num % den, 0);
        assert_eq!(p.answer, k * m + n * num / den, "{}", p.prompt);
    }
}

#[test]
fn answers_are_exact_and_must_agree() {
    // Python's floats make int(0.29 * 100) 28; exact arithmetic makes it 29.
    let text = template(
        "{a,1} apples",
        "- $a = range(1, 5)",
        "- True",
        "int(0.29 * 100) + a - a",
        "29",
    );
    assert!(draw(&text, 0, 5).unwrap().iter().all(|p| p.answer == 29));
    // `#answer:` and `####` round differently: only even `a` agree.
    let text = template("{a,1} apples", "- $a = range(1, 100)", "", "a // 2", "0")
        .replace("#### {a // 2}", "#### {(a + 1) // 2}");
    for p in draw(&text, 0, 50).unwrap() {
        assert_eq!(p.answer * 2, numbers(&p.prompt)[0], "{}", p.prompt);
    }
    // Thousands are grouped in the question, as the package does.
    let text = template("{a,1} ants.", "- $a = range(10000, 10001)", "", "a", "0");
    assert_eq!(draw(&text, 0, 1).unwrap()[0].prompt, "10,000 ants.");
}

#[test]
fn exact_numbers_behave_like_python_on_exact_values() {
    let r = |n, d| Ratio::new(n, d).unwrap();
    assert_eq!(r(7, 1).modulo(r(-2, 1)).unwrap(), r(-1, 1));
    assert_eq!(r(-7, 2).floor_div(r(1, 1)).unwrap(), r(-4, 1));
    assert_eq!(r(5, 2).round(0).unwrap(), r(2, 1), "ties to even");
    assert_eq!(r(7, 2).round(0).unwrap(), r(4, 1));
    assert_eq!(r(2675, 1000).round(2).unwrap(), r(268, 100));
    assert!(r(1, 3) < r(1, 2) && r(-1, 3) > r(-1, 2));
    assert_eq!(Number::new(r(4, 1), Kind::Float).display().unwrap(), "4.0");
    assert_eq!(
        Number::new(r(1, 4), Kind::Fraction).display().unwrap(),
        "1/4"
    );
    assert!(Number::new(r(1, 3), Kind::Float).display().is_err());
    assert_eq!(r(2, 1).pow(127), Err(EvalError::Overflow));
    assert_eq!(r(-1, 1).pow(1 << 40).unwrap(), r(1, 1));
}

/// The error for `text`, which must come quickly and not be a panic.
fn refused(text: &str) -> SymbolicError {
    let start = Instant::now();
    let error = draw(text, 0, 3).expect_err("a hostile template is refused");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "refused in bounded time: {error}"
    );
    error
}

#[test]
fn hostile_templates_are_refused_with_typed_errors() {
    let base = |init: &str, conditions: &str, answer: &str| {
        template("{a,1} x", init, conditions, answer, "1")
    };
    let at_line = |e: SymbolicError| match e {
        SymbolicError::Template { line, message, .. } => (line, message),
        other => panic!("expected a template error, got {other}"),
    };
    let (line, message) = at_line(refused(&base("- $a = rnge(1, 5)", "", "a")));
    assert!(
        message.contains("unknown function `rnge`") && line == Some(11),
        "{line:?} {message}"
    );
    let (_, message) = at_line(refused(&base("- $a = range(1, 5)", "- (a + 1 > 2", "a")));
    assert!(message.contains("unbalanced"), "{message}");
    let (_, message) = at_line(refused(&base("- $a = range(1, 5)", "", "a + b")));
    assert!(message.contains("`b` is neither"), "{message}");
    let (_, message) = at_line(refused(&base(
        "- $a = range(1, 5)",
        "",
        "a + 123456789012345678901234567890123456789012",
    )));
    assert!(message.contains("too large"), "{message}");
    let (_, message) = at_line(refused(&base(
        "- $a = range(1, 5)",
        "",
        &format!("{}a{}", "(".repeat(200), ")".repeat(200)),
    )));
    assert!(message.contains("nested"), "{message}");
    let (_, message) = at_line(refused(&base("- $a = range(1, 5)", "- a.real > 0", "a")));
    assert!(message.contains("attribute"), "{message}");
    let (_, message) = at_line(refused(&base(
        "- $a = range(1, 5)",
        "- sample([1, 2]) > 0",
        "a",
    )));
    assert!(message.contains("only #init"), "{message}");

    let no_draw = |e: SymbolicError| match e {
        SymbolicError::NoValidDraw {
            reason,
            attempts,
            times,
            ..
        } => {
            assert_eq!(attempts, MAX_ATTEMPTS);
            assert!(times > 0);
            reason
        }
        other => panic!("expected no valid draw, got {other}"),
    };
    let eval = |r: Rejection| match r {
        Rejection::Eval { error, .. } => error,
        other => panic!("expected an evaluation error, got {other}"),
    };
    assert_eq!(
        eval(no_draw(refused(&base(
            "- $a = range(1, 5)",
            "",
            "a // (a - a)"
        )))),
        EvalError::DivisionByZero
    );
    assert_eq!(
        eval(no_draw(refused(&base(
            "- $a = range(2, 5)",
            "",
            "a ** 1000"
        )))),
        EvalError::Overflow
    );
    assert_eq!(
        eval(no_draw(refused(&base(
            "- $a = range(2, 5)",
            "",
            "10 ** 10 ** 10"
        )))),
        EvalError::Overflow
    );
    assert_eq!(
        no_draw(refused(&base("- $a = range(1, 5)", "- a > 100", "a"))),
        Rejection::Condition("a > 100".into())
    );
    assert!(matches!(
        no_draw(refused(&base("- $a = range(1, 5)", "", "a + 0.5"))),
        Rejection::NotInteger(_)
    ));
    let disagreeing = base("- $a = range(1, 5)", "", "a").replace("#### {a}", "#### {a + 1}");
    assert!(matches!(
        no_draw(refused(&disagreeing)),
        Rejection::Disagree { .. }
    ));
    assert!(matches!(
        eval(no_draw(refused(&base("- $a = range(5, 1)", "", "a")))),
        EvalError::Value(_)
    ));
    assert!(matches!(
        eval(no_draw(refused(&base("- $a = sample(names)", "", "a + 1")))),
        EvalError::Type(_)
    ));
    // A range too wide to list is drawn from without listing it.
    assert_eq!(
        draw(&base("- $a = range(0, 10 ** 15)", "", "a - a"), 0, 2).unwrap()[0].answer,
        0
    );
}

#[test]
fn a_directory_loads_strictly_or_leniently() {
    let dir = verifine_test_support::scratch_dir("symbolic");
    std::fs::write(dir.join("replacements.json"), LISTS).unwrap();
    std::fs::write(dir.join("0001.toml"), FOG).unwrap();
    std::fs::write(
        dir.join("0002.toml"),
        template("{n,Ava} x", "- n = sample(names)", "", "len(n)", "3"),
    )
    .unwrap();
    std::fs::write(
        dir.join("0003.toml"),
        template("{a,2} x", "- $a = range(1, 5)", "", "a * 2", "5"),
    )
    .unwrap();
    std::fs::write(
        dir.join("0000.toml"),
        template("{a,1} x", "- $a = range(1, 5)", "- a > 9", "a", "1"),
    )
    .unwrap();
    let error = load_dir(&dir).unwrap_err().to_string();
    assert!(
        error.contains("0000.toml") && error.contains("no valid variant"),
        "{error}"
    );
    let loaded = load_dir_skipping(&dir).unwrap();
    assert_eq!(loaded.templates.len(), 2);
    assert_eq!(
        loaded
            .refused
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["0000.toml", "0003.toml"]
    );
    // 0003's answer expression does not give its own problem's answer.
    let original = &loaded.refused[1].1;
    assert!(
        matches!(original, SymbolicError::Original { .. }),
        "{original}"
    );
    assert!(
        original.to_string().contains("give 4, but its answer is 5"),
        "{original}"
    );
    assert!(loaded.templates[0].source().ends_with("0001.toml"));
    let refused = &loaded.refused[0].1;
    assert!(refused.to_string().contains("0000.toml"), "{refused}");
}

#[test]
#[ignore = "needs models/fetch.sh gsm-symbolic (PyPI)"]
fn the_packages_templates_load_and_reproduce_their_original_answers() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/gsm-symbolic/eng");
    assert!(
        dir.join("0000.toml").exists(),
        "run models/fetch.sh gsm-symbolic first"
    );
    let loaded = load_dir_skipping(&dir).unwrap();
    assert_eq!(loaded.templates.len() + loaded.refused.len(), 100);
    for (name, reason) in &loaded.refused {
        println!("refused {name}: {reason}");
    }
    let (mut reproduced, mut same_question, mut unrecoverable, mut not_integer) =
        (0, 0, Vec::new(), Vec::new());
    let mut wrong = Vec::new();
    let mut rng = SplitMix64::new(2024);
    for template in &loaded.templates {
        // Twenty variants each: every one met its conditions with a whole answer.
        let problems = variants(template, &mut rng, 20).unwrap();
        assert!(
            problems
                .iter()
                .all(|p| p.solution == format!("#### {}", p.answer) && !p.prompt.contains('{'))
        );
        let expected = template.original_answer().unwrap_or("?");
        match template.original() {
            _ if expected.parse::<i64>().is_err() => {
                not_integer.push(format!("{}: {expected}", template.source()))
            }
            Err(error) => unrecoverable.push(error.to_string()),
            Ok(original) if original.answer.to_string() == expected => {
                reproduced += 1;
                same_question +=
                    usize::from(Some(original.prompt.as_str()) == template.original_question());
            }
            Ok(original) => wrong.push(format!(
                "{}: {} instead of {expected}",
                template.source(),
                original.answer
            )),
        }
    }
    println!(
        "{} of 100 loaded; originals reproduced {reproduced} (question text identical {same_question}), \
         not rebuilt {}, original answer not an integer {}, wrong {}",
        loaded.templates.len(),
        unrecoverable.len(),
        not_integer.len(),
        wrong.len()
    );
    for line in unrecoverable.iter().chain(&not_integer).chain(&wrong) {
        println!("  {line}");
    }
    assert!(
        loaded.templates.len() >= 90,
        "{} of 100 loaded",
        loaded.templates.len()
    );
    assert!(
        wrong.is_empty(),
        "original answers not reproduced: {wrong:#?}"
    );
}
