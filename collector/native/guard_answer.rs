//! The guard's answer from what the rules found about a call and the target's decision:
//! collector/guard/check.py `answer_for` (with `decision_verdict`, `unknown` and `answer_of`),
//! which stays the specification; tests/unit/guard/test_native_judge.py holds the two equal on
//! every captured call under every decision the guard acts on.

use crate::rules_pack::{Pattern, Refused};

/// The reason a run whose model call asking for the call has not arrived gets (`PARTIAL`).
const PARTIAL: &str = "guard_run_partial";
/// The reason an answer gets when no pack in force selects the target (`NO_PACK`).
const NO_PACK: &str = "guard_no_pack";

/// One verdict about the call: answer (allow, review, deny), reason code, message, evidence.
pub(crate) type Verdict = (String, String, String, Vec<String>);

/// deny over review over allow (evaluators/guard.py `ANSWER_STRENGTH`).
fn strength(answer: &str) -> u8 {
    match answer {
        "deny" => 2,
        "review" => 1,
        _ => 0,
    }
}

/// `strongest_answer`: allow when there is nothing to weigh; the first of the strongest.
fn strongest<'a>(answers: impl IntoIterator<Item = &'a str>) -> &'a str {
    answers
        .into_iter()
        .fold(None, |best: Option<&str>, a| match best {
            Some(b) if strength(b) >= strength(a) => Some(b),
            _ => Some(a),
        })
        .unwrap_or("allow")
}

/// A pack's `guard:` settings, as evaluators/guard.py `GuardSettings` reads them.
pub(crate) struct Settings {
    writes: Vec<Pattern>,
    on_unknown: String,
    quarantine: String,
}

impl Settings {
    /// `writes` (globs), `on_unknown` (allow, review, deny) and `quarantine` (those or
    /// deny_writes) as the validated pack has them; refused when a glob is not read natively.
    pub(crate) fn new(
        writes: &[String],
        on_unknown: String,
        quarantine: String,
    ) -> Result<Self, Refused> {
        Ok(Settings {
            writes: writes
                .iter()
                .map(|w| Pattern::new(w))
                .collect::<Result<_, _>>()?,
            on_unknown,
            quarantine,
        })
    }

    fn is_write(&self, tool: &str) -> bool {
        self.writes.iter().any(|p| p.matches(tool))
    }
}

/// The answer given: allow, review or deny, its reasons, evidence and messages, and the
/// target's decision it was given under.
#[derive(Clone)]
pub(crate) struct Answered {
    pub answer: String,
    pub reasons: Vec<String>,
    pub evidence: Vec<String>,
    pub messages: Vec<String>,
    pub decision: String,
}

/// What the call asks, for the answer: the tool's name and the model's id for the call.
pub(crate) struct Asked<'a> {
    pub tool: &'a str,
    pub tool_call_id: Option<&'a str>,
}

/// `answer_for`: the packs that select the run (`chosen`) found `found` about the call; the
/// target's `decision` fires for `fired`; `asked`: the model call that asked for the call
/// (when it names its id) is in the run.
pub(crate) fn answer_for(
    call: &Asked,
    chosen: &[&Settings],
    asked: bool,
    found: Vec<Verdict>,
    decision: &str,
    fired: &[String],
) -> Answered {
    let on_decision = decision_verdict(decision, fired, call.tool, chosen);
    if !asked {
        let message = format!(
            "no model call of the run so far asked for call {}; flush the span processor before \
             asking",
            call.tool_call_id.unwrap_or("None")
        );
        return unknown(chosen, PARTIAL, message, decision, on_decision);
    }
    let found: Vec<Verdict> = on_decision.into_iter().chain(found).collect();
    if chosen.is_empty() && found.is_empty() {
        let message = "no pack in force selects this target".to_owned();
        return allowed(vec![NO_PACK.to_owned()], vec![message], decision);
    }
    answer_of(found, decision)
}

fn allowed(reasons: Vec<String>, messages: Vec<String>, decision: &str) -> Answered {
    Answered {
        answer: "allow".to_owned(),
        reasons,
        evidence: Vec::new(),
        messages,
        decision: decision.to_owned(),
    }
}

/// `decision_verdict`: what the target's current decision says about this call.
fn decision_verdict(
    decision: &str,
    fired: &[String],
    tool: &str,
    settings: &[&Settings],
) -> Option<Verdict> {
    let quarantined = matches!(decision, "QUARANTINE" | "ROLLBACK");
    if !quarantined && decision != "DISABLE" && decision != "DOWNGRADE" {
        return None;
    }
    let writes = settings.iter().any(|s| s.is_write(tool));
    let because = if fired.is_empty() {
        String::new()
    } else {
        format!(" ({})", fired.join(", "))
    };
    let verdict = |answer: &str, reason: &str, message: String| {
        Some((answer.to_owned(), reason.to_owned(), message, Vec::new()))
    };
    match decision {
        "DISABLE" => verdict(
            "deny",
            "target_disabled",
            format!("the target is DISABLEd{because}"),
        ),
        "DOWNGRADE" if !settings.iter().any(|s| !s.writes.is_empty()) => verdict(
            "review",
            "target_downgraded_writes_unknown",
            "the target is DOWNGRADEd and no pack says which tools write (guard.writes)".to_owned(),
        ),
        "DOWNGRADE" if writes => verdict(
            "deny",
            "target_downgraded",
            format!("the target is DOWNGRADEd to read-only{because}; {tool} writes"),
        ),
        "DOWNGRADE" => None,
        _ => {
            let mut policies: Vec<&str> = settings.iter().map(|s| s.quarantine.as_str()).collect();
            if policies.is_empty() {
                policies.push("deny_writes");
            }
            let answers = policies
                .into_iter()
                .filter(|p| *p != "deny_writes" || writes)
                .map(|p| if p == "deny_writes" { "deny" } else { p });
            let answer = strongest(answers);
            if answer == "allow" {
                return None;
            }
            verdict(
                answer,
                &format!("target_{}", decision.to_lowercase()),
                format!("the target is {decision}d{because}"),
            )
        }
    }
}

/// `unknown`: the packs' choice for a run the guard cannot see whole (review when none says),
/// unless the target's decision says more.
fn unknown(
    chosen: &[&Settings],
    reason: &str,
    message: String,
    decision: &str,
    on_decision: Option<Verdict>,
) -> Answered {
    let answer = if chosen.is_empty() {
        "review"
    } else {
        strongest(chosen.iter().map(|s| s.on_unknown.as_str()))
    };
    if answer == "allow" && on_decision.is_none() {
        return allowed(vec![reason.to_owned()], vec![message], decision);
    }
    let own = (answer.to_owned(), reason.to_owned(), message, Vec::new());
    answer_of(on_decision.into_iter().chain([own]).collect(), decision)
}

/// `answer_of`: the strongest answer, with the reasons, evidence and messages of the verdicts
/// that give it (each reason and evidence span once, in order).
fn answer_of(found: Vec<Verdict>, decision: &str) -> Answered {
    let answer = strongest(found.iter().map(|v| v.0.as_str())).to_owned();
    if answer == "allow" {
        return allowed(Vec::new(), Vec::new(), decision);
    }
    let (mut reasons, mut evidence, mut messages) = (Vec::new(), Vec::new(), Vec::new());
    for (_, reason, message, spans) in found.into_iter().filter(|v| v.0 == answer) {
        if !reasons.contains(&reason) {
            reasons.push(reason);
        }
        for span in spans {
            if !evidence.contains(&span) {
                evidence.push(span);
            }
        }
        messages.push(message);
    }
    Answered {
        answer,
        reasons,
        evidence,
        messages,
        decision: decision.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(writes: &[&str], quarantine: &str) -> Settings {
        let writes: Vec<String> = writes.iter().map(|w| (*w).to_owned()).collect();
        Settings::new(&writes, "review".to_owned(), quarantine.to_owned()).expect("settings")
    }

    #[test]
    fn the_strongest_answer_is_the_first_of_the_strongest() {
        assert_eq!(strongest(["review", "deny", "allow"]), "deny");
        assert_eq!(strongest([]), "allow");
    }

    #[test]
    fn a_downgrade_denies_the_writes_only() {
        let s = settings(&["update_*"], "deny_writes");
        let call = Asked {
            tool: "update_account",
            tool_call_id: None,
        };
        let denied = answer_for(&call, &[&s], true, Vec::new(), "DOWNGRADE", &[]);
        assert_eq!(denied.answer, "deny");
        assert_eq!(denied.reasons, ["target_downgraded"]);
        let read = Asked {
            tool: "get_account",
            tool_call_id: None,
        };
        let allowed = answer_for(&read, &[&s], true, Vec::new(), "DOWNGRADE", &[]);
        assert_eq!(allowed.answer, "allow");
    }

    #[test]
    fn a_partial_run_gets_the_packs_choice() {
        let s = settings(&[], "deny_writes");
        let call = Asked {
            tool: "t",
            tool_call_id: Some("call_1"),
        };
        let got = answer_for(&call, &[&s], false, Vec::new(), "PASS", &[]);
        assert_eq!(
            (got.answer.as_str(), got.reasons[0].as_str()),
            ("review", PARTIAL)
        );
        assert!(got.messages[0].contains("call_1"));
    }
}
