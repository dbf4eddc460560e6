//! What a judge model is asked to answer about rubric items, and how its
//! answer is read: the JSON schema sent with a query, and the verdicts
//! read back from whatever text comes.

/// The JSON schema of the answer about `items` rubric items, as the
/// grader template asks for it: one object with an explanation and
/// `criteria_met`, or a list of exactly `items` objects. Sent with the
/// query, a server that enforces schemas (and the local judge) can only
/// answer within it.
pub fn verdict_schema(items: usize) -> String {
    // Written out, so the explanation comes before the verdict whatever
    // order a JSON map keeps.
    const VERDICT: &str = r#"{"type": "object", "properties": {"criteria_met": {"type": "boolean"}}, "required": ["criteria_met"], "additionalProperties": false}"#;
    const EXPLAINED: &str = r#"{"type": "object", "properties": {"explanation": {"type": "string", "maxLength": 300}, "criteria_met": {"type": "boolean"}}, "required": ["explanation", "criteria_met"], "additionalProperties": false}"#;
    if items == 1 {
        EXPLAINED.to_string()
    } else {
        format!(
            r#"{{"type": "array", "minItems": {items}, "maxItems": {items}, "items": {VERDICT}}}"#
        )
    }
}

/// One judge-model answer read as verdicts on `expected` items, in order:
/// a list of booleans or of `{"criteria_met": bool, "explanation"?}`, or for
/// one item that object alone (or a plain YES/NO).
pub fn parse_verdicts(
    answer: &str,
    expected: usize,
) -> Result<Vec<(bool, Option<String>)>, String> {
    let json = |open: char, close: char| {
        let start = answer.find(open)?;
        let end = answer.rfind(close)?;
        (end > start)
            .then(|| serde_json::from_str::<serde_json::Value>(&answer[start..=end]).ok())?
    };
    let read = |value: &serde_json::Value| -> Option<(bool, Option<String>)> {
        match value {
            serde_json::Value::Bool(met) => Some((*met, None)),
            serde_json::Value::Object(fields) => Some((
                fields.get("criteria_met")?.as_bool()?,
                fields
                    .get("explanation")
                    .and_then(|e| e.as_str())
                    .map(str::to_string),
            )),
            _ => None,
        }
    };
    if let Some(serde_json::Value::Array(items)) = json('[', ']') {
        let verdicts: Option<Vec<_>> = items.iter().map(read).collect();
        return match verdicts {
            Some(v) if v.len() == expected => Ok(v),
            Some(v) => Err(format!("{} verdicts for {expected} rubric items", v.len())),
            None => Err("a verdict in the list has no boolean criteria_met".to_string()),
        };
    }
    if expected == 1 {
        if let Some(verdict) = json('{', '}').as_ref().and_then(read) {
            return Ok(vec![verdict]);
        }
        return crate::verdicts::parse_yes_no(answer).map(|met| vec![(met, None)]);
    }
    Err(format!("no JSON list of {expected} verdicts in the answer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_objects_and_plain_answers() {
        assert_eq!(
            parse_verdicts("```json\n[true, {\"criteria_met\": false}]\n```", 2),
            Ok(vec![(true, None), (false, None)])
        );
        assert_eq!(
            parse_verdicts(r#"{"explanation": "cites it", "criteria_met": true}"#, 1),
            Ok(vec![(true, Some("cites it".to_string()))])
        );
        assert_eq!(
            parse_verdicts("NO, it does not.", 1),
            Ok(vec![(false, None)])
        );
        assert!(
            parse_verdicts("[true]", 3)
                .unwrap_err()
                .contains("1 verdicts for 3")
        );
        assert!(parse_verdicts("[true, \"maybe\"]", 2).is_err());
        assert!(parse_verdicts("yes", 2).is_err());
    }

    #[test]
    fn verdict_schemas_are_json_and_ask_for_what_the_template_asks() {
        let one: serde_json::Value = serde_json::from_str(&verdict_schema(1)).unwrap();
        assert_eq!(
            one["required"],
            serde_json::json!(["explanation", "criteria_met"])
        );
        let three: serde_json::Value = serde_json::from_str(&verdict_schema(3)).unwrap();
        assert_eq!(
            (three["minItems"].as_u64(), three["maxItems"].as_u64()),
            (Some(3), Some(3))
        );
        assert_eq!(
            three["items"]["properties"]["criteria_met"]["type"],
            "boolean"
        );
    }
}
