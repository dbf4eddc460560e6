//! A local judge's answer to a query with a JSON schema always parses and
//! fits the schema, even from a random-weight model that otherwise
//! rambles: the structure is written by the decoder, the model chooses
//! only the values.
#![cfg(feature = "local")]

use serde_json::Value;
use verifine_judge::local::LocalBackend;
use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};
use verifine_judge::{LocalConfig, PromptTemplate};
use verifine_runtime::judge_models::{ModelError, ModelRequest};

fn rambler(seed: u64) -> LocalBackend {
    let dir = std::env::temp_dir().join(format!("verifine-schema-{}-{seed}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tiny.gguf");
    write_tiny_llama(
        &path,
        TinySpec {
            seed,
            ..TinySpec::default()
        },
    )
    .unwrap();
    LocalBackend::new(&LocalConfig {
        path,
        template: PromptTemplate::Chatml,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    })
    .unwrap()
}

/// Whether `value` fits `schema` (the subset the local judge enforces).
fn fits(value: &Value, schema: &Value) -> bool {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        return options.contains(value);
    }
    match schema["type"].as_str().unwrap() {
        "object" => schema["properties"]
            .as_object()
            .unwrap()
            .iter()
            .all(|(name, s)| value.get(name).is_some_and(|v| fits(v, s))),
        "array" => value.as_array().is_some_and(|items| {
            let count = items.len() as u64;
            schema["minItems"].as_u64().is_none_or(|min| count >= min)
                && schema["maxItems"].as_u64().is_none_or(|max| count <= max)
                && items.iter().all(|v| fits(v, &schema["items"]))
        }),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.as_str().is_some_and(|s| {
            schema["maxLength"]
                .as_u64()
                .is_none_or(|max| s.chars().count() as u64 <= max)
        }),
        other => panic!("no such type {other}"),
    }
}

#[test]
fn schema_answers_always_parse_and_fit() {
    let schemas = [
        r#"{"type": "object", "properties": {"explanation": {"type": "string", "maxLength": 60}, "criteria_met": {"type": "boolean"}}}"#,
        r#"{"type": "array", "minItems": 3, "maxItems": 3, "items": {"type": "object", "properties": {"criteria_met": {"type": "boolean"}}}}"#,
        r#"{"type": "object", "properties": {"score": {"type": "integer"}, "ratio": {"type": "number"}, "verdict": {"enum": ["pass", "fail", "unsure"]}}}"#,
        r#"{"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 12}}"#,
    ];
    let prompts = [
        "Does the response mention water? Explain.",
        "Grade these three items and return JSON.",
        "Rate the answer from 1 to 10.",
    ];
    let mut answered = 0;
    for seed in 0..3 {
        let model = rambler(seed);
        // Unconstrained, the same model does not produce JSON.
        let free = ModelRequest::new(prompts[1], 40);
        let rambling = model.exchange_all(&[&free]).remove(0).answer.unwrap();
        assert!(serde_json::from_str::<Value>(&rambling.text).is_err());
        for schema in schemas {
            let expected: Value = serde_json::from_str(schema).unwrap();
            for prompt in prompts {
                let request = ModelRequest {
                    json_schema: Some(schema.to_string()),
                    ..ModelRequest::new(prompt, 200)
                };
                let answer = model.exchange_all(&[&request]).remove(0).answer.unwrap();
                let value: Value = serde_json::from_str(&answer.text)
                    .unwrap_or_else(|e| panic!("{e}: {:?} for {schema}", answer.text));
                assert!(fits(&value, &expected), "{value} does not fit {schema}");
                assert!(answer.usage.output > 0);
                answered += 1;
            }
        }
    }
    assert_eq!(answered, 36);
}

#[test]
fn a_schema_outside_the_subset_is_refused_by_name() {
    let model = rambler(7);
    let request = ModelRequest {
        json_schema: Some(r#"{"type": "null"}"#.into()),
        ..ModelRequest::new("anything", 20)
    };
    let error = model
        .exchange_all(&[&request])
        .remove(0)
        .answer
        .unwrap_err();
    assert!(
        matches!(&error, ModelError::BadQuery(m) if m.contains("\"null\"")),
        "{error}"
    );
}
