//! JSON values read as the Python evaluators read them (`evaluators/matchers.py`): equality
//! that is Python's `==` (1 == 1.0, nested true == 1) with `same`'s top-level bool rule,
//! `float()` of text, `Condition.check`, `at_path`, and `format(x, "g")` for messages.

use serde_json::{Map, Number, Value};

use crate::rules_pack::{PathPart, Refused};

/// A value the interpreter cannot judge as Python would (non-ASCII text given to `float()`):
/// the rule is evaluated in Python for that run instead.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Defer(pub &'static str);

/// `str.lower()`: Rust's lowercasing is Unicode's full mapping with the final-sigma rule, as
/// CPython's.
pub fn python_lower(text: &str) -> String {
    text.to_lowercase()
}

enum Num {
    Int(i128),
    Float(f64),
}

fn num(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i as i128)
    } else if let Some(u) = n.as_u64() {
        Num::Int(u as i128)
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// Python compares an int and a float exactly (2**53 + 1 != 2.0**53).
fn int_eq_float(i: i128, f: f64) -> bool {
    f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7e38 && (f as i128) == i
}

fn num_eq(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Float(x), Num::Float(y)) => x == y,
        (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => int_eq_float(i, f),
    }
}

fn as_num(v: &Value) -> Option<Num> {
    match v {
        Value::Bool(b) => Some(Num::Int(*b as i128)),
        Value::Number(n) => Some(num(n)),
        _ => None,
    }
}

/// Python's `==` between two JSON values (bool is an int there).
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (as_num(a), as_num(b)) {
            (Some(x), Some(y)) => num_eq(x, y),
            _ => false,
        },
    }
}

/// `same`: equality that does not take true for 1.
pub fn same(a: &Value, b: &Value) -> bool {
    py_eq(a, b) && matches!(a, Value::Bool(_)) == matches!(b, Value::Bool(_))
}

/// Python's whitespace among ASCII characters (`str.isspace`).
fn python_space(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c' | '\x1c'..='\x1f'
    )
}

/// `float(text)`: None where Python raises ValueError.
pub fn python_float(text: &str) -> Result<Option<f64>, Defer> {
    if !text.is_ascii() {
        // Python reads other scripts' digits and Unicode spaces: not worth a second reading.
        return Err(Defer("non-ASCII text as a number"));
    }
    let t = text.trim_matches(python_space);
    let bytes = t.as_bytes();
    let mut clean = String::with_capacity(t.len());
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let before = i > 0 && bytes[i - 1].is_ascii_digit();
            let after = bytes.get(i + 1).is_some_and(u8::is_ascii_digit);
            if !(before && after) {
                return Ok(None);
            }
        } else {
            clean.push(b as char);
        }
    }
    // Rust's grammar is Python's (sign, digits, `.`, exponent, inf/infinity/nan in any case).
    Ok(clean.parse::<f64>().ok())
}

/// `as_number`: None for bools and what `float()` refuses.
fn as_number(v: &Value) -> Result<Option<f64>, Defer> {
    match v {
        Value::Bool(_) => Ok(None),
        Value::Number(n) => Ok(Some(match num(n) {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        })),
        Value::String(s) => python_float(s),
        _ => Ok(None),
    }
}

/// `Condition`: a test on one value, absent (`None`) when the key is missing.
#[derive(Debug, Default)]
pub struct Condition {
    equals: Option<Value>,
    not_equals: Option<Value>,
    one_of: Option<Vec<Value>>,
    exists: Option<bool>,
    gt: Option<f64>,
    gte: Option<f64>,
    lt: Option<f64>,
    lte: Option<f64>,
}

fn boxed(value: Value, key: &str) -> Result<Value, Refused> {
    // The native form boxes `equals` and `not_equals` in a one-item list: `null` is a value.
    match value {
        Value::Array(mut items) if items.len() == 1 => Ok(items.remove(0)),
        _ => Err(Refused(format!("{key}: not a boxed value"))),
    }
}

fn bound(value: Value, key: &str) -> Result<Option<f64>, Refused> {
    match value {
        Value::Null => Ok(None),
        Value::Number(n) => Ok(n.as_f64()),
        _ => Err(Refused(format!("{key}: not a number"))),
    }
}

impl Condition {
    pub fn new(fields: Map<String, Value>) -> Result<Self, Refused> {
        let mut c = Condition::default();
        for (key, value) in fields {
            match key.as_str() {
                "equals" => c.equals = Some(boxed(value, &key)?),
                "not_equals" => c.not_equals = Some(boxed(value, &key)?),
                "one_of" => match value {
                    Value::Array(items) => c.one_of = Some(items),
                    Value::Null => {}
                    _ => return Err(Refused("one_of: not a list".into())),
                },
                "exists" => match value {
                    Value::Bool(b) => c.exists = Some(b),
                    Value::Null => {}
                    _ => return Err(Refused("exists: not a boolean".into())),
                },
                "gt" => c.gt = bound(value, &key)?,
                "gte" => c.gte = bound(value, &key)?,
                "lt" => c.lt = bound(value, &key)?,
                "lte" => c.lte = bound(value, &key)?,
                "regex" => return Err(Refused("regex: regexes are not matched natively".into())),
                "glob" => {
                    return Err(Refused(
                        "glob: a value's text (Python's str()) is not made natively".into(),
                    ))
                }
                "schema" => {
                    return Err(Refused(
                        "schema: JSON schemas are not checked natively".into(),
                    ))
                }
                other => return Err(Refused(format!("{other}: not read natively"))),
            }
        }
        Ok(c)
    }

    /// `Condition.check`; `value` is None when the key is absent.
    pub fn check(&self, value: Option<&Value>) -> Result<bool, Defer> {
        let present = value.is_some();
        if self.exists.is_some_and(|e| e != present) {
            return Ok(false);
        }
        let Some(value) = value else {
            let only_negative = self.equals.is_none() && self.one_of.is_none();
            return Ok(self.exists == Some(false)
                || (self.exists.is_none() && self.not_equals.is_some() && only_negative));
        };
        if self.not_equals.as_ref().is_some_and(|n| same(value, n)) {
            return Ok(false);
        }
        if self.equals.as_ref().is_some_and(|e| !same(value, e)) {
            return Ok(false);
        }
        if self
            .one_of
            .as_ref()
            .is_some_and(|items| !items.iter().any(|v| same(value, v)))
        {
            return Ok(false);
        }
        if self.gt.is_some() || self.gte.is_some() || self.lt.is_some() || self.lte.is_some() {
            let Some(n) = as_number(value)? else {
                return Ok(false);
            };
            // A NaN passes no bound, as in Python.
            let holds =
                |bound: Option<f64>, ok: fn(f64, f64) -> bool| bound.is_none_or(|b| ok(n, b));
            if !(holds(self.gt, |n, b| n > b)
                && holds(self.gte, |n, b| n >= b)
                && holds(self.lt, |n, b| n < b)
                && holds(self.lte, |n, b| n <= b))
            {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// `at_path`: the value at a JSON path, None when absent.
pub fn at_path<'a>(document: &'a Value, parts: &[PathPart]) -> Option<&'a Value> {
    let mut node = document;
    for part in parts {
        node = match (part, node) {
            (PathPart::Key(k), Value::Object(map)) => map.get(k)?,
            (PathPart::Index(i), Value::Array(items)) => items.get(usize::try_from(*i).ok()?)?,
            _ => return None,
        };
    }
    Some(node)
}

/// `format(x, "g")`: six significant digits, exponent form below 1e-4 and from 1e6.
pub fn python_g(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let sci = format!("{:.5e}", x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        let decimals = (5 - exp) as usize;
        let fixed = format!("{:.*}", decimals, x);
        strip_zeros(&fixed)
    } else {
        let m = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    }
}

fn strip_zeros(text: &str) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn g_format_is_pythons() {
        for (x, text) in [
            (600000.0, "600000"),
            (1234567.0, "1.23457e+06"),
            (1234565.0, "1.23456e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5, "1.5"),
            (-2.0, "-2"),
            (1e300, "1e+300"),
            (123456.4, "123456"),
            (999999.5, "1e+06"),
            (0.1 + 0.2, "0.3"),
        ] {
            assert_eq!(python_g(x), text, "{x}");
        }
    }

    #[test]
    fn equality_is_pythons() {
        assert!(same(&json!(1), &json!(1.0)));
        assert!(!same(&json!(true), &json!(1)));
        assert!(same(&json!([true]), &json!([1])));
        assert!(!same(
            &json!(9007199254740993u64),
            &json!(9007199254740992.0)
        ));
        assert!(same(
            &json!({"a": 1, "b": [2]}),
            &json!({"b": [2.0], "a": 1})
        ));
        assert!(!same(&json!("1"), &json!(1)));
    }

    #[test]
    fn float_of_text_is_pythons() {
        assert_eq!(python_float(" 1_000.5\n"), Ok(Some(1000.5)));
        assert_eq!(python_float("1__0"), Ok(None));
        assert_eq!(python_float("_1"), Ok(None));
        assert_eq!(python_float("-Infinity"), Ok(Some(f64::NEG_INFINITY)));
        assert_eq!(python_float("1e5"), Ok(Some(1e5)));
        assert_eq!(python_float(""), Ok(None));
        assert!(python_float("١").is_err());
    }
}
