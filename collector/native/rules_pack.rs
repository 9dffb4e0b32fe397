//! A rule pack compiled for the native interpreter: the pack's rules in the "native form" the
//! Python model gives (`collector/evaluation/native_rules.py`: the model dumped without its
//! defaults, each matcher with its description and each JSON path split into parts), read once
//! per pack version. A rule type, option or value the interpreter does not read as Python
//! does is refused with the reason; such rules stay with the Python evaluators.

use serde_json::Value;

use crate::rules_keywords::Keywords;
use crate::rules_regex::set_of;
use crate::rules_value::{python_lower, Condition};

/// Why a rule (or the pack) cannot be evaluated natively: the whole message.
#[derive(Debug, PartialEq)]
pub struct Refused(pub String);

/// A glob as `fnmatch.fnmatchcase` reads it, or an exact name (`evaluators/matchers.py`
/// `text_matches`). Globs with `[` classes are refused: fnmatch's class syntax has corners
/// (ranges, `!`, empty classes) not worth a second reading.
#[derive(Debug, Clone)]
pub enum Pattern {
    Exact(String),
    Glob(Vec<GlobPart>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum GlobPart {
    Star,
    Any,
    Char(char),
}

impl Pattern {
    pub fn new(text: &str) -> Result<Self, Refused> {
        if text.contains('[') {
            return Err(Refused(format!(
                "glob {text:?} has a `[` class (only `*` and `?` are read natively)"
            )));
        }
        if !text.contains('*') && !text.contains('?') {
            return Ok(Pattern::Exact(text.to_owned()));
        }
        Ok(Pattern::Glob(
            text.chars()
                .map(|c| match c {
                    '*' => GlobPart::Star,
                    '?' => GlobPart::Any,
                    c => GlobPart::Char(c),
                })
                .collect(),
        ))
    }

    pub fn matches(&self, value: &str) -> bool {
        match self {
            Pattern::Exact(text) => text == value,
            Pattern::Glob(parts) => glob_match(parts, value),
        }
    }
}

/// Wildcard matching over code points, the whole text (fnmatch's `(?s:...)\Z`): the greedy
/// two-pointer walk, which backtracks only to the last `*`.
fn glob_match(parts: &[GlobPart], value: &str) -> bool {
    let text: Vec<char> = value.chars().collect();
    let (mut p, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match parts.get(p) {
            Some(GlobPart::Star) => {
                star = Some((p, t));
                p += 1;
            }
            Some(GlobPart::Any) => {
                p += 1;
                t += 1;
            }
            Some(GlobPart::Char(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    parts[p..].iter().all(|part| *part == GlobPart::Star)
}

/// One glob or a list of them, any of which matches; a missing value matches none.
#[derive(Debug, Clone)]
pub struct Globs(pub Vec<Pattern>);

impl Globs {
    fn from_value(value: &Value, what: &str) -> Result<Option<Self>, Refused> {
        let texts: Vec<&str> = match value {
            Value::Null => return Ok(None),
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) => items
                .iter()
                .map(|v| v.as_str())
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Refused(format!("{what}: not a list of globs")))?,
            _ => return Err(Refused(format!("{what}: not a glob"))),
        };
        let patterns = texts
            .into_iter()
            .map(Pattern::new)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Globs(patterns)))
    }

    pub fn matches(&self, value: Option<&str>) -> bool {
        value.is_some_and(|v| self.0.iter().any(|p| p.matches(v)))
    }
}

/// One step of a JSON path (`$.a.b[0]`), split by the Python model (`at_path`'s reading).
#[derive(Debug, Clone)]
pub enum PathPart {
    Key(String),
    Index(u64),
}

/// A condition on one JSON path of a tool call's arguments.
#[derive(Debug)]
pub struct ArgCheck {
    pub path: String,
    pub parts: Vec<PathPart>,
    pub condition: Condition,
}

pub(crate) fn path_part(value: &Value) -> Option<PathPart> {
    match value {
        Value::String(key) => Some(PathPart::Key(key.clone())),
        Value::Number(n) => n.as_u64().map(PathPart::Index),
        _ => None,
    }
}

/// The native form's `[{"path", "parts", "condition"}]` list, in the rule's order.
fn arg_checks(value: Value, what: &str) -> Result<Vec<ArgCheck>, Refused> {
    let bad = || Refused(format!("{what}: not a list of path conditions"));
    let Value::Array(items) = value else {
        return Err(bad());
    };
    items
        .into_iter()
        .map(|item| {
            let Value::Object(mut f) = item else {
                return Err(bad());
            };
            let path = match f.remove("path") {
                Some(Value::String(p)) => p,
                _ => return Err(bad()),
            };
            let parts = match f.remove("parts") {
                Some(Value::Array(parts)) => parts
                    .iter()
                    .map(path_part)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(bad)?,
                _ => return Err(bad()),
            };
            let condition = match f.remove("condition") {
                Some(Value::Object(c)) => {
                    Condition::new(c).map_err(|e| Refused(format!("{what} {path:?}: {}", e.0)))?
                }
                _ => return Err(bad()),
            };
            if !f.is_empty() {
                return Err(bad());
            }
            Ok(ArgCheck {
                path,
                parts,
                condition,
            })
        })
        .collect()
}

/// The native form's `[{"key", "condition"}]` list of span attribute conditions.
fn attribute_checks(value: Value, what: &str) -> Result<Vec<(String, Condition)>, Refused> {
    let bad = || Refused(format!("{what}: not a list of attribute conditions"));
    let Value::Array(items) = value else {
        return Err(bad());
    };
    items
        .into_iter()
        .map(|item| {
            let Value::Object(mut f) = item else {
                return Err(bad());
            };
            let (Some(Value::String(key)), Some(Value::Object(c))) =
                (f.remove("key"), f.remove("condition"))
            else {
                return Err(bad());
            };
            let condition =
                Condition::new(c).map_err(|e| Refused(format!("{what} {key:?}: {}", e.0)))?;
            Ok((key, condition))
        })
        .collect()
}

/// `StepMatcher`: which steps a rule is about.
#[derive(Debug)]
pub struct Matcher {
    pub kinds: Option<Vec<String>>,
    pub name: Option<Globs>,
    pub agent: Option<Globs>,
    pub status: Option<String>,
    /// Span attribute -> condition.
    pub attributes: Vec<(String, Condition)>,
    pub args: Vec<ArgCheck>,
    /// `StepMatcher.describe()`, as the messages quote it.
    pub describe: String,
}

pub(crate) fn matcher(value: Value, what: &str) -> Result<Matcher, Refused> {
    let Value::Object(mut fields) = value else {
        return Err(Refused(format!("{what}: not a step matcher")));
    };
    let describe = match fields.remove("describe") {
        Some(Value::String(s)) => s,
        _ => return Err(Refused(format!("{what}: no description"))),
    };
    let mut m = Matcher {
        kinds: None,
        name: None,
        agent: None,
        status: None,
        attributes: Vec::new(),
        args: Vec::new(),
        describe,
    };
    for (key, value) in fields {
        match key.as_str() {
            "kind" => {
                m.kinds = Some(match value {
                    Value::String(s) => vec![s],
                    Value::Array(items) => items
                        .into_iter()
                        .map(|v| match v {
                            Value::String(s) => Ok(s),
                            _ => Err(Refused(format!("{what}.kind: not a list of kinds"))),
                        })
                        .collect::<Result<_, _>>()?,
                    _ => return Err(Refused(format!("{what}.kind: not a kind"))),
                })
            }
            "name" => m.name = Globs::from_value(&value, &format!("{what}.name"))?,
            "agent" => m.agent = Globs::from_value(&value, &format!("{what}.agent"))?,
            "status" => m.status = value.as_str().map(str::to_owned),
            "args" => m.args = arg_checks(value, &format!("{what}.args"))?,
            "attributes" => m.attributes = attribute_checks(value, &format!("{what}.attributes"))?,
            other => return Err(unsupported(what, other)),
        }
    }
    Ok(m)
}

fn unsupported(what: &str, option: &str) -> Refused {
    let why = match option {
        "attributes" => "span attributes are not read natively",
        "result" => "tool results are not parsed natively",
        "name_regex" | "regex" => "regexes are not matched natively",
        _ => "not read natively",
    };
    Refused(format!("{what}.{option}: {why}"))
}

#[derive(Debug)]
pub enum Order {
    /// `strict`: contiguous among steps of the expected kinds.
    Strict,
    /// `in_order`: in order, gaps allowed.
    Gaps,
    /// `any_order`: all present.
    Any,
}

#[derive(Debug, Default)]
pub struct Budget {
    pub max_steps: Option<f64>,
    pub max_tool_calls: Option<f64>,
    pub max_llm_calls: Option<f64>,
    pub max_tokens: Option<f64>,
    pub max_cost_usd: Option<f64>,
    pub max_duration_ms: Option<f64>,
    pub max_same_call: Option<u64>,
    pub max_consecutive_same_call: Option<u64>,
    pub max_same_tool: Option<u64>,
}

#[derive(Debug)]
pub enum Check {
    Budget(Budget),
    Recovery {
        require_retry: bool,
    },
    Presence {
        step: Matcher,
        min_count: u64,
        max_count: Option<u64>,
    },
    Absence {
        step: Option<Matcher>,
        allowed_tools: Vec<Pattern>,
    },
    Trajectory {
        expected: Vec<Matcher>,
        order: Order,
        order_name: String,
        min_match_rate: f64,
    },
    ToolArgs {
        step: Matcher,
        args: Vec<ArgCheck>,
        required: bool,
    },
    Mcp {
        servers: Option<Globs>,
        /// `tools` as a list: allowed on any server.
        tools_anywhere: Option<Vec<Pattern>>,
        /// `tools` as server glob -> tool globs, in the rule's order.
        tools_by_server: Option<Vec<(Pattern, Vec<Pattern>)>>,
        /// `unknown_server`: review, fail or allow.
        unknown_server: String,
    },
    Consistency {
        step: Matcher,
        attribute: String,
        root_attribute: Option<String>,
        /// `missing: pass`: a step or root without the attribute lets the step through.
        missing_pass: bool,
    },
    Secrets {
        arguments: bool,
        results: bool,
        /// The detectors and patterns, in the rule's order (the pass message names them).
        names: Vec<String>,
        /// The rule's RE2 set (`Scanner.set`): on ASCII text, no match means nothing found.
        set: regex::RegexSet,
        /// The keyword net's judgement, when the set holds it (the built-in `api_key`).
        keywords: Option<Keywords>,
    },
    Precedes(Box<crate::rules_precedes::Precedes>),
    Flow(crate::rules_flow::Flow),
    Retrieval(crate::rules_retrieval::Retrieval),
}

/// One rule, compiled.
#[derive(Debug)]
pub struct Rule {
    pub id: String,
    pub rule_type: String,
    pub severity: String,
    pub reason: String,
    pub on_fail: String,
    /// `when.input`: the run's input text must satisfy it (an empty input is absent).
    pub when_input: Option<Condition>,
    /// A `scope: session` rule: evaluated over sessions, not in a run's round.
    pub session: bool,
    /// Missing steps could change the verdict (`RuleType.needs_all_steps`).
    pub needs_all_steps: bool,
    pub check: Check,
}

/// A pack, compiled: its selector, approval tools, and the rules read natively.
#[derive(Debug)]
pub struct Pack {
    pub name: String,
    pub version: String,
    pub service: Option<Globs>,
    pub agent: Option<Globs>,
    pub service_version: Option<Globs>,
    /// `approvals.tools`, lower-cased (matched against the lower-cased tool name).
    pub approval_tools: Vec<Pattern>,
    pub rules: Vec<Rule>,
    /// Rules left to Python: (rule id, why).
    pub refused: Vec<(String, String)>,
}

pub(crate) fn take_str(
    fields: &mut serde_json::Map<String, Value>,
    key: &str,
    default: &str,
) -> Result<String, Refused> {
    match fields.remove(key) {
        None => Ok(default.to_owned()),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Refused(format!("{key}: not text"))),
    }
}

pub(crate) fn take_bool(
    fields: &mut serde_json::Map<String, Value>,
    key: &str,
    default: bool,
) -> Result<bool, Refused> {
    match fields.remove(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(Refused(format!("{key}: not a boolean"))),
    }
}

pub(crate) fn take_count(
    fields: &mut serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<u64>, Refused> {
    match fields.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| Refused(format!("{key}: not a count"))),
        Some(_) => Err(Refused(format!("{key}: not a count"))),
    }
}

pub(crate) fn take_number(
    fields: &mut serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<f64>, Refused> {
    match fields.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            // An integer limit past 2^53 would compare differently as a double.
            if let Some(i) = n.as_i64() {
                if i.unsigned_abs() > 1 << 53 {
                    return Err(Refused(format!(
                        "{key}: integer too large to compare exactly"
                    )));
                }
            } else if n.as_u64().is_some() {
                return Err(Refused(format!(
                    "{key}: integer too large to compare exactly"
                )));
            }
            n.as_f64()
                .map(Some)
                .ok_or_else(|| Refused(format!("{key}: not a number")))
        }
        Some(_) => Err(Refused(format!("{key}: not a number"))),
    }
}

fn compile_rule(value: Value) -> Result<Rule, (String, Refused)> {
    let Value::Object(mut f) = value else {
        return Err((String::new(), Refused("a rule is a mapping".into())));
    };
    let id = match f.remove("id") {
        Some(Value::String(s)) => s,
        _ => return Err((String::new(), Refused("a rule needs an id".into()))),
    };
    compile_fields(&id, f).map_err(|e| (id, e))
}

fn compile_fields(id: &str, mut f: serde_json::Map<String, Value>) -> Result<Rule, Refused> {
    let rule_type = take_str(&mut f, "type", "")?;
    f.remove("description");
    let severity = take_str(&mut f, "severity", "medium")?;
    let reason = take_str(&mut f, "reason", "")?;
    let on_fail = take_str(&mut f, "on_fail", "FAIL")?;
    let mut when_input = None;
    match f.remove("when") {
        None | Some(Value::Null) => {}
        Some(Value::Object(mut when)) => {
            if let Some(input) = when.remove("input") {
                let Value::Object(c) = input else {
                    return Err(Refused("when.input: not a condition".into()));
                };
                when_input =
                    Some(Condition::new(c).map_err(|e| Refused(format!("when.input: {}", e.0)))?);
            }
            if let Some(other) = when.keys().next() {
                return Err(unsupported("when", other));
            }
        }
        Some(_) => return Err(Refused("when: not a mapping".into())),
    }
    let mut session = false;
    let (needs_all_steps, check) = match rule_type.as_str() {
        "budget" => {
            let scope = take_str(&mut f, "scope", "trajectory")?;
            session = scope == "session";
            f.remove("max_turns");
            let limit = take_number;
            let mut b = Budget {
                max_steps: limit(&mut f, "max_steps")?,
                max_tool_calls: limit(&mut f, "max_tool_calls")?,
                max_llm_calls: limit(&mut f, "max_llm_calls")?,
                max_tokens: limit(&mut f, "max_tokens")?,
                max_cost_usd: limit(&mut f, "max_cost_usd")?,
                max_duration_ms: limit(&mut f, "max_duration_ms")?,
                ..Budget::default()
            };
            b.max_same_call = take_count(&mut f, "max_same_call")?;
            b.max_consecutive_same_call = take_count(&mut f, "max_consecutive_same_call")?;
            b.max_same_tool = take_count(&mut f, "max_same_tool")?;
            (true, Check::Budget(b))
        }
        "recovery" => (
            true,
            Check::Recovery {
                require_retry: take_bool(&mut f, "require_retry", true)?,
            },
        ),
        "presence" => {
            let step = matcher(f.remove("step").unwrap_or(Value::Null), "step")?;
            let min_count = take_count(&mut f, "min_count")?.unwrap_or(1);
            let max_count = take_count(&mut f, "max_count")?;
            (
                true,
                Check::Presence {
                    step,
                    min_count,
                    max_count,
                },
            )
        }
        "absence" => {
            let step = match f.remove("step") {
                None | Some(Value::Null) => None,
                Some(v) => Some(matcher(v, "step")?),
            };
            let allowed_tools = match f.remove("allowed_tools") {
                None | Some(Value::Null) => Vec::new(),
                Some(v) => Globs::from_value(&v, "allowed_tools")?
                    .map(|g| g.0)
                    .unwrap_or_default(),
            };
            (
                false,
                Check::Absence {
                    step,
                    allowed_tools,
                },
            )
        }
        "trajectory" => {
            let expected = match f.remove("expected") {
                Some(Value::Array(items)) => items
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| matcher(v, &format!("expected[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?,
                _ => return Err(Refused("expected: not a list of steps".into())),
            };
            if expected.is_empty() {
                return Err(Refused("expected: no steps".into()));
            }
            let order_name = take_str(&mut f, "order", "in_order")?;
            let order = match order_name.as_str() {
                "strict" => Order::Strict,
                "in_order" => Order::Gaps,
                "any_order" => Order::Any,
                other => return Err(Refused(format!("order {other:?} unknown"))),
            };
            let min_match_rate = take_number(&mut f, "min_match_rate")?.unwrap_or(1.0);
            (
                true,
                Check::Trajectory {
                    expected,
                    order,
                    order_name,
                    min_match_rate,
                },
            )
        }
        "tool_args" => {
            let step = matcher(f.remove("step").unwrap_or(Value::Null), "step")?;
            let args = arg_checks(f.remove("args").unwrap_or(Value::Null), "args")?;
            if args.is_empty() {
                return Err(Refused("args: none given".into()));
            }
            let required = take_bool(&mut f, "required", false)?;
            (
                false,
                Check::ToolArgs {
                    step,
                    args,
                    required,
                },
            )
        }
        "mcp" => {
            let servers = match f.remove("servers") {
                None => None,
                Some(v) => Globs::from_value(&v, "servers")?,
            };
            let (mut tools_anywhere, mut tools_by_server) = (None, None);
            match f.remove("tools") {
                None | Some(Value::Null) => {}
                Some(v @ Value::Array(_)) => {
                    tools_anywhere = Globs::from_value(&v, "tools")?.map(|g| g.0);
                }
                Some(Value::Object(map)) => {
                    let mut by_server = Vec::new();
                    for (glob, tools) in map {
                        let tools = Globs::from_value(&tools, "tools")?
                            .map(|g| g.0)
                            .unwrap_or_default();
                        by_server.push((Pattern::new(&glob)?, tools));
                    }
                    tools_by_server = Some(by_server);
                }
                Some(_) => return Err(Refused("tools: not a list or a mapping".into())),
            }
            let unknown_server = take_str(&mut f, "unknown_server", "review")?;
            if !["review", "fail", "allow"].contains(&unknown_server.as_str()) {
                return Err(Refused(format!(
                    "unknown_server {unknown_server:?} unknown"
                )));
            }
            (
                false,
                Check::Mcp {
                    servers,
                    tools_anywhere,
                    tools_by_server,
                    unknown_server,
                },
            )
        }
        "consistency" => {
            let step = matcher(f.remove("step").unwrap_or(Value::Null), "step")?;
            let attribute = take_str(&mut f, "attribute", "")?;
            let root_attribute = match f.remove("root_attribute") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s),
                Some(_) => return Err(Refused("root_attribute: not text".into())),
            };
            let missing_pass = match take_str(&mut f, "missing", "fail")?.as_str() {
                "pass" => true,
                "fail" => false,
                other => return Err(Refused(format!("missing {other:?} unknown"))),
            };
            (
                false,
                Check::Consistency {
                    step,
                    attribute,
                    root_attribute,
                    missing_pass,
                },
            )
        }
        "secrets" | "pii" => {
            let scope = take_str(&mut f, "scope", "both")?;
            let (arguments, results) = match scope.as_str() {
                "arguments" => (true, false),
                "results" => (false, true),
                "both" => (true, true),
                other => return Err(Refused(format!("scope {other:?} unknown"))),
            };
            let texts = |v: Option<Value>, key: &str| match v {
                Some(Value::Array(items)) => items
                    .into_iter()
                    .map(|v| match v {
                        Value::String(s) => Ok(s),
                        _ => Err(Refused(format!("{key}: not a list of text"))),
                    })
                    .collect::<Result<Vec<_>, _>>(),
                _ => Err(Refused(format!("{key}: not a list of text"))),
            };
            let names = texts(f.remove("names"), "names")?;
            let set = set_of(&texts(f.remove("set"), "set")?)?;
            let keywords = match f.remove("keywords") {
                None | Some(Value::Null) => None,
                Some(Value::Object(mut k)) => {
                    let index = take_count(&mut k, "index")?.unwrap_or(u64::MAX) as usize;
                    if index >= set.len() {
                        return Err(Refused("keywords.index: not in the set".into()));
                    }
                    let assignment = take_str(&mut k, "assignment", "")?;
                    let secret_key = take_str(&mut k, "secret_key", "")?;
                    let placeholders = texts(k.remove("placeholders"), "placeholders")?;
                    let parts = texts(k.remove("placeholder_parts"), "placeholder_parts")?;
                    let min_chars = take_count(&mut k, "min_chars")?.unwrap_or(0) as usize;
                    let min_entropy = take_number(&mut k, "min_entropy")?.unwrap_or(0.0);
                    Some(Keywords::new(
                        index,
                        &assignment,
                        &secret_key,
                        placeholders,
                        parts,
                        min_chars,
                        min_entropy,
                    )?)
                }
                Some(_) => return Err(Refused("keywords: not a mapping".into())),
            };
            (
                false,
                Check::Secrets {
                    arguments,
                    results,
                    names,
                    set,
                    keywords,
                },
            )
        }
        "precedes" => (
            true,
            Check::Precedes(Box::new(crate::rules_precedes::compile(&mut f)?)),
        ),
        "flow" => (false, Check::Flow(crate::rules_flow::compile(&mut f)?)),
        "retrieval" => (
            true,
            Check::Retrieval(crate::rules_retrieval::compile(&mut f)?),
        ),
        other => return Err(Refused(format!("{other} rules are not evaluated natively"))),
    };
    if let Some(option) = f.keys().next() {
        return Err(unsupported(&rule_type, option));
    }
    Ok(Rule {
        id: id.to_owned(),
        rule_type,
        severity,
        reason,
        on_fail,
        when_input,
        session,
        needs_all_steps,
        check,
    })
}

/// The pack from its native form. With `partial`, rules the interpreter cannot read are left
/// out (listed in `refused`); without, the first one refuses the whole pack.
pub fn compile(text: &str, partial: bool) -> Result<Pack, Refused> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Refused(format!("not a pack's native form: {e}")))?;
    let Value::Object(mut f) = value else {
        return Err(Refused("not a pack's native form: not a mapping".into()));
    };
    let name = take_str(&mut f, "name", "")?;
    let version = take_str(&mut f, "version", "")?;
    let mut pack = Pack {
        name,
        version,
        service: None,
        agent: None,
        service_version: None,
        approval_tools: vec![Pattern::new("*approv*")?],
        rules: Vec::new(),
        refused: Vec::new(),
    };
    if let Some(Value::Object(mut selector)) = f.remove("selector") {
        let mut globs = |key: &str| {
            selector
                .remove(key)
                .map(|v| Globs::from_value(&v, &format!("selector.{key}")))
                .transpose()
                .map(Option::flatten)
        };
        pack.service = globs("service")?;
        pack.agent = globs("agent")?;
        pack.service_version = globs("version")?;
        if let Some(other) = selector.keys().next() {
            return Err(unsupported("selector", other));
        }
    }
    if let Some(Value::Object(mut approvals)) = f.remove("approvals") {
        // Here only which tools are approvals matters (a step's kind); the statuses the result
        // shapes give are read by precedes rules, whose form carries the whole recogniser.
        approvals.remove("results");
        approvals.remove("defaults");
        if let Some(tools) = approvals.remove("tools") {
            let lowered = match tools {
                Value::Array(items) => items
                    .iter()
                    .map(|v| v.as_str().map(python_lower))
                    .collect::<Option<Vec<_>>>(),
                _ => None,
            }
            .ok_or_else(|| Refused("approvals.tools: not a list of globs".into()))?;
            pack.approval_tools = lowered
                .iter()
                .map(|g| Pattern::new(g))
                .collect::<Result<_, _>>()?;
        }
        if let Some(other) = approvals.keys().next() {
            return Err(unsupported("approvals", other));
        }
    }
    let rules = match f.remove("rules") {
        Some(Value::Array(rules)) => rules,
        None => Vec::new(),
        Some(_) => return Err(Refused("rules: not a list".into())),
    };
    for rule in rules {
        match compile_rule(rule) {
            Ok(rule) => pack.rules.push(rule),
            Err((id, why)) if partial => pack.refused.push((id, why.0)),
            Err((id, why)) => return Err(Refused(format!("rule {id:?}: {}", why.0))),
        }
    }
    if let Some(other) = f.keys().next() {
        return Err(Refused(format!("{other}: not read natively")));
    }
    Ok(pack)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_read_as_fnmatch() {
        let p = |g: &str, v: &str| Pattern::new(g).unwrap().matches(v);
        assert!(p("update_*", "update_account"));
        assert!(p("*", ""));
        assert!(!p("update_*", "xupdate_account"));
        assert!(p("a?c", "a\nc"));
        assert!(p("*approv*", "request_approval"));
        assert!(p("a*b*c", "aXbYbZc"));
        assert!(!p("a*b*c", "aXbYbZ"));
        assert!(!p("exact", "exac"));
        assert!(Pattern::new("a[bc]").is_err());
    }

    #[test]
    fn unsupported_rules_are_named() {
        let text = r#"{"name": "p", "version": "1", "rules": [
            {"id": "s", "type": "similarity", "reason": "x"},
            {"id": "r", "type": "recovery", "reason": "y"}]}"#;
        let err = compile(text, false).unwrap_err();
        assert_eq!(
            err.0,
            "rule \"s\": similarity rules are not evaluated natively"
        );
        let pack = compile(text, true).unwrap();
        assert_eq!(pack.rules.len(), 1);
        assert_eq!(pack.refused[0].0, "s");
    }

    #[test]
    fn unknown_options_are_refused() {
        let text = r#"{"name": "p", "version": "1", "rules": [
            {"id": "a", "type": "presence", "reason": "x",
             "step": {"name_regex": "x", "describe": "step(...)"}}]}"#;
        let err = compile(text, false).unwrap_err();
        assert!(err.0.contains("name_regex"), "{}", err.0);
    }
}
