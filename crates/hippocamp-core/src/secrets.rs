//! Secret detection and metadata redaction: one rule set for every path.
//!
//! [`detect`] decides whether text looks like it carries a credential.
//! `add_entry` rejects such content and `add_events` skips such events with
//! the same [`SecretKind`] as the reason. [`redact_metadata`] replaces the
//! values of secret-bearing keys (and secret-looking strings) with
//! [`REDACTED`] before metadata is stored.
//!
//! What is caught:
//! - `name: value` / `name=value` where `name` is an API key, password,
//!   passwd, access or refresh token, authorization or bearer (any case,
//!   with `_`, `-` or a space inside), or a compound name ending in one of
//!   token, password, passwd, pwd, secret, api key, access key, private key,
//!   credential(s) (`github_token: …`, `db_password=…`);
//! - `Bearer <token>` without `:`/`=` when the token is at least 16
//!   characters with a digit, or at least 32 characters;
//! - Google API keys (`AIza…`), OpenAI-style keys (`sk-…`, 16+ characters),
//!   AWS access key ids (`AKIA…`, `ASIA…`), GitHub tokens (`ghp_`, `gho_`,
//!   `ghu_`, `ghs_`, `ghr_`, `github_pat_`), Slack tokens (`xoxb-` …), JWTs
//!   (three base64url segments starting `eyJ`), PEM private-key blocks.
//!
//! What is not caught: secrets in prose ("my password is hunter2"), bare
//! high-entropy strings without a known prefix, short bearer tokens, keys
//! of providers not listed above, and personal data in general. This is a
//! guard against accidental credential capture, not PII classification.

use std::fmt;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The marker that replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// Which rule recognised a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SecretKind {
    /// `password: …`, `api_key=…`, `github_token: …` and the like.
    CredentialAssignment,
    /// `Bearer <token>`.
    BearerToken,
    /// A Google API key (`AIza…`).
    GoogleApiKey,
    /// An OpenAI-style secret key (`sk-…`).
    OpenAiKey,
    /// An AWS access key id.
    AwsAccessKeyId,
    /// A GitHub token.
    GithubToken,
    /// A Slack token.
    SlackToken,
    /// A JSON Web Token.
    Jwt,
    /// A PEM private-key block.
    PemPrivateKey,
}

impl SecretKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::CredentialAssignment => "credential_assignment",
            SecretKind::BearerToken => "bearer_token",
            SecretKind::GoogleApiKey => "google_api_key",
            SecretKind::OpenAiKey => "openai_key",
            SecretKind::AwsAccessKeyId => "aws_access_key_id",
            SecretKind::GithubToken => "github_token",
            SecretKind::SlackToken => "slack_token",
            SecretKind::Jwt => "jwt",
            SecretKind::PemPrivateKey => "pem_private_key",
        }
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

struct Rules {
    plain: Vec<(SecretKind, Regex)>,
    /// Every pattern of `plain` and `bearer` at once, with ASCII word
    /// boundaries: one pass over the text rules out every rule for almost
    /// all text, where trying them one by one scanned it ten times. An
    /// ASCII boundary holds wherever a Unicode one does next to the ASCII
    /// characters these patterns put there, so the set matches whenever a
    /// rule would (a superset); the rules then decide. Unicode boundaries
    /// would keep the set off the fast engine.
    any: RegexSet,
    bearer: Regex,
    uri_userinfo: Regex,
    uri_query: Regex,
}

/// The prefixes of AWS access key ids: the rule's and the clues'.
const AWS_PREFIXES: [&str; 8] = [
    "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
];

/// Whether `text` holds a clue that some rule could match: a `:` or `=`
/// right after (spaces aside) a word an assignment's name ends with (see
/// [`assignment_clue`]), `sk-`, `xox` or `-----` (`sk-`, `xox?-`,
/// `-----BEGIN`; looked for only where a `-` is), `_` (`gh?_`,
/// `github_pat_`), `eyJ`, `AIza`, an AWS prefix, or `bearer` in any ASCII
/// case (no other character folds to its letters). Each rule's pattern
/// holds one literally. Prose rarely does, and a few `memchr` scans cost
/// a fraction of the rule set's DFA, which was a tenth of in-memory
/// ingestion and, run after a sync on cold caches, a measured share of a
/// single durable add. A bare `-` (a hyphen) or `:` is no clue: remembered
/// turns are mostly `speaker: text`, so a bare `:` sent every one of them
/// through the DFA.
/// `tests::every_token_prefix_is_caught` and
/// `tests::the_set_never_hides_a_rule` hold `detect` to the rules.
fn has_clue(text: &str) -> bool {
    let b = text.as_bytes();
    let [sk, xox, dashes, jwt] = &*CLUE_FINDERS;
    memchr::memchr(b'_', b).is_some()
        || assignment_clue(text)
        || (memchr::memchr(b'-', b).is_some()
            && (sk.find(b).is_some() || xox.find(b).is_some() || dashes.find(b).is_some()))
        || jwt.find(b).is_some()
        || memchr::memchr_iter(b'A', b).any(|i| {
            b.get(i..i + 4)
                .is_some_and(|w| w == b"AIza" || AWS_PREFIXES.iter().any(|p| w == p.as_bytes()))
        })
        || memchr::memchr2_iter(b'b', b'B', b).any(|i| {
            b.get(i..i + 6)
                .is_some_and(|w| w.eq_ignore_ascii_case(b"bearer"))
        })
}

/// [`has_clue`]'s substrings, searched for with finders built once:
/// `memmem::find` builds one per call, a measured share of a single add.
static CLUE_FINDERS: LazyLock<[memchr::memmem::Finder<'static>; 4]> =
    LazyLock::new(|| ["sk-", "xox", "-----", "eyJ"].map(memchr::memmem::Finder::new));

/// The words the two assignment rules' names end with, right before
/// their `\s*[:=]` (`api key`, `access_key`, `db_password`, ...).
const ASSIGNED: &[&str] = &[
    "key",
    "token",
    "password",
    "passwd",
    "pwd",
    "secret",
    "credential",
    "credentials",
    "authorization",
    "bearer",
];

/// Whether some `:` or `=` in `text` follows, past white space (`\s`, as
/// the rules mean it), one of [`ASSIGNED`] in any case the rules' `(?i)`
/// matches: an assignment rule can match nowhere else.
fn assignment_clue(text: &str) -> bool {
    memchr::memchr2_iter(b':', b'=', text.as_bytes()).any(|at| {
        // `at` is an ASCII byte's index, so a char boundary.
        let name = text
            .get(..at)
            .unwrap_or("")
            .trim_end_matches(char::is_whitespace);
        ASSIGNED.iter().any(|w| ends_with_folded(name, w))
    })
}

/// Whether `text` ends with the lowercase ASCII `word` under the simple
/// case folding of `(?i)`: an ASCII letter's other case, and the two
/// non-ASCII characters that fold to ASCII letters (the Kelvin sign to
/// `k`, the long s to `s`).
fn ends_with_folded(text: &str, word: &str) -> bool {
    let mut chars = text.chars().rev();
    word.bytes().rev().all(|w| {
        chars.next().is_some_and(|c| {
            c.to_ascii_lowercase() == char::from(w)
                || (w == b'k' && c == '\u{212A}')
                || (w == b's' && c == '\u{17F}')
        })
    })
}

// The patterns are fixed literals; a failure to compile is a bug caught by
// every test run, so a panic here can never reach a user.
#[allow(clippy::expect_used)]
static RULES: LazyLock<Rules> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(p).expect("secret pattern compiles");
    let plain = vec![
        (
            SecretKind::CredentialAssignment,
            re(
                r"(?i)(?:api[\s_-]?key|password|passwd|access[\s_-]?token|refresh[\s_-]?token|authorization|bearer)\s*[:=]\s*\S",
            ),
        ),
        (
            SecretKind::CredentialAssignment,
            re(
                r"(?i)\b[a-z0-9]+(?:[_-][a-z0-9]+)*[_-](?:token|password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?)\s*[:=]\s*\S",
            ),
        ),
        (SecretKind::GoogleApiKey, re(r"AIza[0-9A-Za-z_-]{20,}")),
        (SecretKind::OpenAiKey, re(r"\bsk-[0-9A-Za-z_-]{16,}")),
        (
            SecretKind::AwsAccessKeyId,
            re(&format!(
                r"\b(?:{})[0-9A-Z]{{16}}\b",
                AWS_PREFIXES.join("|")
            )),
        ),
        (
            SecretKind::GithubToken,
            re(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
        ),
        (
            SecretKind::SlackToken,
            re(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ),
        (
            SecretKind::Jwt,
            re(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        ),
        (
            SecretKind::PemPrivateKey,
            re(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
        ),
    ];
    let bearer = re(r"(?i)\bbearer\s+([A-Za-z0-9._~+/-]+=*)");
    let any = RegexSet::new(
        plain
            .iter()
            .map(|(_, r): &(SecretKind, Regex)| r.as_str())
            .chain([bearer.as_str()])
            .map(|p| p.replace(r"\b", r"(?-u:\b)")),
    )
    .expect("secret patterns compile as a set");
    Rules {
        plain,
        any,
        bearer,
        uri_userinfo: re(r"://[^/\s:@]+:[^/\s@]+@"),
        uri_query: re(
            r"(?i)([?&](?:access_token|refresh_token|id_token|token|api_key|apikey|key|password|secret|client_secret|sig|signature)=)[^&\s#]+",
        ),
    }
});

/// The first secret rule `text` trips, if any.
pub fn detect(text: &str) -> Option<SecretKind> {
    if !has_clue(text) || !RULES.any.is_match(text) {
        return None;
    }
    detect_by_rules(text)
}

/// The rules one by one, in order (what decides; [`detect`] first rules
/// out text no rule can match).
fn detect_by_rules(text: &str) -> Option<SecretKind> {
    let rules = &*RULES;
    for (kind, re) in &rules.plain {
        if re.is_match(text) {
            return Some(*kind);
        }
    }
    for cap in rules.bearer.captures_iter(text) {
        let token = cap.get(1).map_or("", |m| m.as_str());
        let has_digit = token.bytes().any(|b| b.is_ascii_digit());
        if (token.len() >= 16 && has_digit) || token.len() >= 32 {
            return Some(SecretKind::BearerToken);
        }
    }
    None
}

const SENSITIVE_KEYS: &[&str] = &[
    "authorization",
    "proxy_authorization",
    "x_api_key",
    "api_key",
    "apikey",
    "api_secret",
    "cookie",
    "set_cookie",
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "access_token",
    "refresh_token",
    "id_token",
    "token",
    "credential",
    "credentials",
    "private_key",
    "client_assertion",
    "bearer",
    "credential_rotator",
    "session_token",
    "security_token",
    "otp",
    "pin",
];

/// Splits a key into lowercase words: camelCase humps, `-`, `_`, `.` and
/// spaces all separate words (`githubToken` and `github-token` give
/// `["github", "token"]`).
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for ch in key.chars() {
        if ch == '_' || ch == '-' || ch == '.' || ch.is_whitespace() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if ch.is_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = ch.is_lowercase() || ch.is_ascii_digit();
        cur.extend(ch.to_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Whether values under `key` are redacted: the key, split into words, is
/// one of the known secret-bearing names or contains one as a run of whole
/// words (`github_token`, `db_password`, `x-api-key`, `clientSecret`).
pub fn is_sensitive_key(key: &str) -> bool {
    let words = key_words(key);
    for len in 1..=3.min(words.len()) {
        for window in words.windows(len) {
            let joined = window.join("_");
            if SENSITIVE_KEYS.contains(&joined.as_str()) {
                return true;
            }
        }
    }
    false
}

/// Redacts a metadata object in place: values under secret-bearing keys,
/// strings that trip [`detect`], and credentials inside URIs
/// (`https://user:pw@host`, `?token=…`) all become [`REDACTED`].
pub fn redact_metadata(map: &mut serde_json::Map<String, Value>) {
    for (k, v) in map.iter_mut() {
        if is_sensitive_key(k) {
            *v = Value::String(REDACTED.to_owned());
        } else {
            redact_value(v);
        }
    }
}

fn redact_value(v: &mut Value) {
    match v {
        Value::Object(map) => redact_metadata(map),
        Value::Array(items) => items.iter_mut().for_each(redact_value),
        Value::String(s) => {
            if detect(s).is_some() {
                REDACTED.clone_into(s);
            } else if s.contains("://") {
                let rules = &*RULES;
                let scrubbed = rules
                    .uri_userinfo
                    .replace_all(s, format!("://{REDACTED}@").as_str());
                let scrubbed = rules
                    .uri_query
                    .replace_all(&scrubbed, format!("${{1}}{REDACTED}").as_str());
                if scrubbed != *s {
                    *s = scrubbed.into_owned();
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    proptest! {
        /// The clues and the one-pass set never rule out what a rule
        /// matches, even with non-ASCII word characters next to a
        /// pattern's boundaries, or case folds of ASCII letters (the
        /// Kelvin sign, the long s).
        #[test]
        fn the_set_never_hides_a_rule(parts in proptest::collection::vec(prop::sample::select(vec![
            "é", "日本", "ß", "K", " ", ".", "=", ": ", "-", "_", "x", "7",
            "AKIA", "ABCDEFGHIJ234567", "sk-", "abcdefghijklmnop12", "password",
            "db_password", "Bearer ", "Bearer", "ghp_", "abcdefghijklmnopqrstuvwxyz0123456789",
            "xoxb-", "eyJ", "eyJhbGciOiJIUzI1NiJ9", "-----BEGIN RSA PRIVATE KEY-----", "AIza",
            "api key", "\u{2019}", "token", "BEARER\t", "bEaReR ", "PASSWD", "pa\u{17F}\u{17F}word",
            "ASIA", "ANVA", "gho_", "github_pat_", "xoxp-", "-----BEGIN OPENSSH PRIVATE KEY-----",
            "AIzaSyA0123456789abcdefghij", "aws_secret_access_key", "\t", "\n",
            ":", " = ", "Key", "\u{212A}EY", "to\u{212A}en", "monkey", "pwd", "-secret",
            "_Credentials", "credential", "AUTHORIZATION", "api-key", "\u{a0}", "\u{2003}",
            "Caroline: ", "se\u{17F}ret",
        ]), 0..12)) {
            let text: String = parts.concat();
            prop_assert_eq!(detect(&text), detect_by_rules(&text), "{:?}", text);
        }
    }

    /// Hyphens are common in prose and are no clue by themselves; only
    /// the token rules' own literals around one are.
    #[test]
    fn a_hyphen_alone_is_no_clue() {
        assert!(!has_clue(
            "a well-known, long-term plan with my sister-in-law"
        ));
        for clue in ["ask-", "xoxo-", "------"] {
            assert!(has_clue(&format!("a well-known {clue} plan")), "{clue}");
        }
    }

    /// A `:` or `=` is a clue only right after a word an assignment's
    /// name ends with: a remembered turn's `speaker:` is none.
    #[test]
    fn a_colon_alone_is_no_clue() {
        for text in [
            "Caroline: I went to a support group yesterday",
            "Melanie: the meeting is at 10:30, ratio 2:1 and x = 3",
        ] {
            assert!(!has_clue(text), "{text}");
        }
        for text in [
            "my API key: x",
            "Password   =x",
            "the db-pwd\u{a0}: x",
            "TO\u{212A}EN=x",
            "the Credentials:x",
            "the db-secret :x",
            "authorization\t:",
        ] {
            assert!(has_clue(text), "{text}");
        }
    }

    /// Every alternative prefix of every token rule, alone in prose with
    /// no other clue, is still caught: the clues leave none out.
    #[test]
    fn every_token_prefix_is_caught() {
        let body = "A1b2C3d4E5f6G7h8J9k0L1m2N3p4Q5r6S7t8";
        let mut cases: Vec<(String, SecretKind)> = Vec::new();
        for p in [
            "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
        ] {
            cases.push((format!("{p}ABCDEFGHIJ234567"), SecretKind::AwsAccessKeyId));
        }
        for p in ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"] {
            cases.push((format!("{p}{body}"), SecretKind::GithubToken));
        }
        for p in ["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"] {
            cases.push((format!("{p}{body}"), SecretKind::SlackToken));
        }
        cases.extend([
            (format!("AIza{body}"), SecretKind::GoogleApiKey),
            (format!("sk-{body}"), SecretKind::OpenAiKey),
            (format!("eyJ{body}.{body}.{body}"), SecretKind::Jwt),
            (
                "-----BEGIN EC PRIVATE KEY-----".to_owned(),
                SecretKind::PemPrivateKey,
            ),
            (format!("BeArEr {body}"), SecretKind::BearerToken),
            (
                "db_password: x".to_owned(),
                SecretKind::CredentialAssignment,
            ),
            ("API KEY=x".to_owned(), SecretKind::CredentialAssignment),
        ]);
        for (token, kind) in cases {
            let text = format!("here it is {token} in a sentence");
            assert_eq!(detect_by_rules(&text), Some(kind), "{text}");
            assert_eq!(detect(&text), Some(kind), "{text}");
        }
    }

    #[test]
    fn reference_patterns() {
        assert_eq!(
            detect("api_key: abcdefghijklmnop"),
            Some(SecretKind::CredentialAssignment)
        );
        assert_eq!(
            detect("my Password = hunter2"),
            Some(SecretKind::CredentialAssignment)
        );
        assert_eq!(
            detect("access token:xyz"),
            Some(SecretKind::CredentialAssignment)
        );
        assert_eq!(
            detect("Authorization: Basic abc"),
            Some(SecretKind::CredentialAssignment)
        );
        assert_eq!(
            detect("key AIzaSyA1234567890abcdefghijk"),
            Some(SecretKind::GoogleApiKey)
        );
        assert_eq!(
            detect("use sk-abcdefghijklmnop1234"),
            Some(SecretKind::OpenAiKey)
        );
    }

    #[test]
    fn extended_patterns() {
        assert_eq!(
            detect("Bearer abcdefghij0123456789"),
            Some(SecretKind::BearerToken)
        );
        assert_eq!(
            detect("-----BEGIN RSA PRIVATE KEY-----\nMIIE..."),
            Some(SecretKind::PemPrivateKey)
        );
        assert_eq!(
            detect("-----BEGIN PRIVATE KEY-----"),
            Some(SecretKind::PemPrivateKey)
        );
        assert_eq!(
            detect("id AKIAIOSFODNN7EXAMPLE ok"),
            Some(SecretKind::AwsAccessKeyId)
        );
        assert_eq!(
            detect("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            Some(SecretKind::GithubToken)
        );
        assert_eq!(
            detect("github_pat_11ABCDEFG0123456789_abcdefghijkl"),
            Some(SecretKind::GithubToken)
        );
        assert_eq!(
            detect("xoxb-1234567890-abcdef"),
            Some(SecretKind::SlackToken)
        );
        assert_eq!(
            detect(
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
            ),
            Some(SecretKind::Jwt)
        );
        assert_eq!(
            detect("github_token: abc"),
            Some(SecretKind::CredentialAssignment)
        );
        assert_eq!(
            detect("DB_PASSWORD=abc"),
            Some(SecretKind::CredentialAssignment)
        );
    }

    #[test]
    fn ordinary_text_passes() {
        for text in [
            "I love hiking with my dog on weekends.",
            "The ring bearer walked down the aisle.",
            "Bearer bonds are old-fashioned.",
            "Let's ask-questions-about-the-weather later",
            "We talked about the task-management-for-everyone app",
            "My password manager is great",
            "She said the secret to baking is patience.",
            "Tokens: we used them at the arcade",
        ] {
            assert_eq!(detect(text), None, "{text}");
        }
    }

    #[test]
    fn key_redaction_covers_compound_names() {
        for k in [
            "password",
            "Password",
            "api-key",
            "X-Api-Key",
            "github_token",
            "db_password",
            "clientSecret",
            "githubToken",
            "session.token",
            "otp",
        ] {
            assert!(is_sensitive_key(k), "{k}");
        }
        for k in [
            "topic",
            "shipping",
            "opinion",
            "speaker",
            "tokenizer",
            "keyboard",
            "dia_id",
        ] {
            assert!(!is_sensitive_key(k), "{k}");
        }
    }

    #[test]
    fn metadata_redaction() {
        let mut m = json!({
            "password": "hunter2",
            "nested": {"github_token": 5, "ok": "fine"},
            "list": [{"apiKey": "x"}, "plain"],
            "url": "https://bob:pw@example.com/x?token=abc&page=2",
            "note": "api_key=abcdef",
            "topic": "otp"
        })
        .as_object()
        .unwrap()
        .clone();
        redact_metadata(&mut m);
        assert_eq!(
            Value::Object(m),
            json!({
                "password": REDACTED,
                "nested": {"github_token": REDACTED, "ok": "fine"},
                "list": [{"apiKey": REDACTED}, "plain"],
                "url": "https://[REDACTED]@example.com/x?token=[REDACTED]&page=2",
                "note": REDACTED,
                "topic": "otp"
            })
        );
    }
}
