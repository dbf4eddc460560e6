//! Default expressions read as TOML values, when they are simple enough:
//! what the configuration reference shows as a key's default.

use super::source::{Sources, split_top_level};

/// A default expression as TOML text, when it is simple enough to read:
/// literals, `None`, strings, enum variants, constants, `vec![…]`,
/// integer products and shifts.
pub fn render_value(sources: &mut Sources, krate: &str, expr: &str) -> Option<String> {
    let e = expr.trim();
    for suffix in [".to_string()", ".into()", ".to_owned()"] {
        if let Some(inner) = e.strip_suffix(suffix) {
            return render_value(sources, krate, inner);
        }
    }
    let call = |name: &str| e.strip_prefix(name)?.strip_prefix('(')?.strip_suffix(')');
    if let Some(inner) = call("Some")
        .or(call("String::from"))
        .or(call("PathBuf::from"))
        .or(call("PluginSpec::from"))
    {
        return render_value(sources, krate, inner);
    }
    if let Some(inner) = call("PluginSetting::new") {
        return Some(format!(
            "{{ plugin = {} }}",
            render_value(sources, krate, inner)?
        ));
    }
    match e {
        "None" => return None,
        "String::new()" => return Some("\"\"".into()),
        "Vec::new()" | "vec![]" => return Some("[]".into()),
        "true" | "false" => return Some(e.into()),
        _ => {}
    }
    if e.starts_with('"') && e.ends_with('"') {
        return Some(e.to_string());
    }
    let numeric = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_digit() || c == '-')
            && s.chars().all(|c| c.is_ascii_digit() || "._e-+".contains(c))
    };
    if numeric(e) {
        return Some(e.to_string());
    }
    if let Some(value) = integer_arithmetic(e) {
        return Some(value.to_string());
    }
    if let Some(list) = e
        .strip_prefix("vec!")
        .unwrap_or(e)
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
    {
        let items: Option<Vec<String>> = split_top_level(list)
            .iter()
            .map(|i| render_value(sources, krate, i))
            .collect();
        return Some(format!("[{}]", items?.join(", ")));
    }
    let segments: Vec<&str> = e.split("::").collect();
    if segments.len() >= 2
        && segments
            .iter()
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'))
    {
        let (ty, last) = (segments[segments.len() - 2], segments[segments.len() - 1]);
        if let Some(enumeration) = sources.type_named(krate, "enum", ty) {
            return enumeration.variant_named(last);
        }
        let value = sources.constant(last)?;
        return render_value(sources, krate, &value);
    }
    None
}

/// What `#[serde(default)]` gives a field of type `ty`.
pub fn type_default(sources: &mut Sources, krate: &str, ty: &str) -> Option<String> {
    if ty.starts_with("Option<") {
        return None;
    }
    let value = match ty.rsplit("::").next().unwrap_or(ty) {
        "usize" | "u64" | "u32" | "u16" | "i64" | "i32" => "0",
        "f64" | "f32" => "0.0",
        "bool" => "false",
        "String" => "\"\"",
        "Table" => "{}",
        t if t.starts_with("Vec<") => "[]",
        t => return sources.type_named(krate, "enum", t)?.variant_named(""),
    };
    Some(value.to_string())
}

/// The inside of a struct literal `Path { … }`.
pub fn struct_literal(expr: &str) -> Option<&str> {
    let open = expr.find('{')?;
    let path = expr[..open].trim();
    let is_path = !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ':');
    (is_path && expr.trim_end().ends_with('}')).then(|| &expr[open + 1..expr.trim_end().len() - 1])
}

/// `a * b * c` or `a << b` over integer literals.
fn integer_arithmetic(e: &str) -> Option<u64> {
    if let Some((a, b)) = e.split_once("<<") {
        return Some(
            a.trim().replace('_', "").parse::<u64>().ok()? << b.trim().parse::<u32>().ok()?,
        );
    }
    e.split('*')
        .map(|f| f.trim().replace('_', "").parse::<u64>().ok())
        .product()
}
