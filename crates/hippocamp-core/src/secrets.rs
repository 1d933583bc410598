//! Secret detection and redaction: one rule set for every path.
//!
//! [`find`] gives each secret's kind and byte range in a text; [`redact`]
//! replaces each with [`REDACTED`]. Every path that stores text an agent
//! or a user wrote (`add_entry`, `add_events`, so HTTP, MCP and the CLI
//! alike) stores it redacted and reports the ranges: the turn is kept, the
//! secret never stored. [`detect`] names the first rule text trips, for
//! what cannot be redacted and is refused instead (identifiers).
//! [`redact_metadata`] replaces the values of secret-bearing keys (and
//! secret-looking strings) with [`REDACTED`] before metadata is stored.
//!
//! What is caught:
//! - `name: value`, `name = value`, `name := value`, `name => value`
//!   (the name may be quoted, as in JSON) where `name` is an API key,
//!   secret key, password, passwd, access or refresh token, authorization
//!   or bearer (any case, with `_`, `-` or a space inside), or a compound
//!   name ending in one of token, password, passwd, pwd, secret, api key,
//!   access key, private key, secret key, credential(s) (`github_token: …`,
//!   `db_password=…`), when the value holds a secret: a quoted literal
//!   (redacted inside its quotes) or a bare value (redacted to the end of
//!   its line). Code that names a credential without holding one passes:
//!   a value that is a call, a subscript, a generic, a template (`{…}`,
//!   `${…}`, `<…>`, `%s`), a reference (`$X`, `@x`, `&x`, `*x`), a dotted
//!   path (`os.environ`, `self.password`), a type or keyword (`str`,
//!   `None`, `null`, `true`), a variable named for a credential
//!   (`password=password`, `user_password`), or a masked or empty literal
//!   (`"***"`, `""`);
//! - `Bearer <token>` without `:`/`=` when the token is at least 16
//!   characters with a digit, or at least 32 characters;
//! - Google API keys (`AIza…`), OpenAI-style keys (`sk-…`, 16+ characters),
//!   AWS access key ids (`AKIA…`, `ASIA…`), GitHub tokens (`ghp_`, `gho_`,
//!   `ghu_`, `ghs_`, `ghr_`, `github_pat_`), Slack tokens (`xoxb-` …), JWTs
//!   (three base64url segments starting `eyJ`), PEM private-key blocks
//!   (redacted through their `-----END …-----` line, or to the end of the
//!   text without one).
//!
//! What is not caught: secrets in prose ("my password is hunter2"), bare
//! high-entropy strings without a known prefix, short bearer tokens, keys
//! of providers not listed above, and personal data in general. This is a
//! guard against accidental credential capture, not PII classification.

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use regex::{Regex, RegexSet};

mod value;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use value::assigned_value;

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

/// A secret found in a text: its kind and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Redaction {
    /// Which rule recognised it.
    pub kind: SecretKind,
    /// Its first byte in the text as submitted.
    pub start: usize,
    /// One past its last byte in the text as submitted.
    pub end: usize,
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

/// Whether some `:` or `=` in `text` follows, past white space and a
/// closing quote, one of [`ASSIGNED`] in any case the rules' `(?i)`
/// matches: an assignment rule can match nowhere else.
fn assignment_clue(text: &str) -> bool {
    memchr::memchr2_iter(b':', b'=', text.as_bytes()).any(|at| {
        // `at` is an ASCII byte's index, so a char boundary.
        let name = text
            .get(..at)
            .unwrap_or("")
            .trim_end_matches(char::is_whitespace)
            .trim_end_matches(['"', '\'']);
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
    // An assignment: the name (group 1), maybe closed by a quote, the
    // operator, and the value's first character (group 2), all on one
    // line. What follows decides whether it holds a secret
    // (`assigned_value`).
    let assigned = r#"["']?[^\S\r\n]*(?::=|=>|[:=])[^\S\r\n]*(\S)"#;
    let plain = vec![
        (
            SecretKind::CredentialAssignment,
            re(&format!(
                r"(?i)(api[\s_-]?key|secret[\s_-]?key|password|passwd|access[\s_-]?token|refresh[\s_-]?token|authorization|bearer){assigned}"
            )),
        ),
        (
            SecretKind::CredentialAssignment,
            re(&format!(
                r"(?i)(\b[a-z0-9]+(?:[_-][a-z0-9]+)*[_-](?:token|password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|secret[_-]?key|credentials?)){assigned}"
            )),
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

/// Every secret in `text`, in order and not overlapping (where two rules
/// cover overlapping bytes, one range covers both, of the first one's
/// kind).
pub fn find(text: &str) -> Vec<Redaction> {
    if !has_clue(text) || !RULES.any.is_match(text) {
        return Vec::new();
    }
    let mut found = spans(text, false);
    found.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    let mut merged: Vec<Redaction> = Vec::with_capacity(found.len());
    for r in found {
        match merged.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// How many assignments in `text` name a credential but hold code, so
/// the value check let them through (`password = db.Column(...)`): what
/// a rule on the name alone would have flagged. For measurement
/// (`hippocamp eval secrets`).
pub fn code_assignments(text: &str) -> usize {
    if !assignment_clue(text) {
        return 0;
    }
    RULES
        .plain
        .iter()
        .filter(|(kind, _)| *kind == SecretKind::CredentialAssignment)
        .flat_map(|(_, re)| re.captures_iter(text))
        .filter(|cap| match (cap.get(1), cap.get(2)) {
            (Some(name), Some(value)) => {
                assigned_value(text, name.start(), name.as_str(), value.start()).is_none()
            }
            _ => false,
        })
        .count()
}

/// `text` with every secret [`find`] finds replaced by [`REDACTED`], and
/// the ranges replaced (in `text` as given). Borrowed when there is none.
pub fn redact(text: &str) -> (Cow<'_, str>, Vec<Redaction>) {
    let found = find(text);
    if found.is_empty() {
        return (Cow::Borrowed(text), found);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in &found {
        out.push_str(text.get(at..r.start).unwrap_or(""));
        out.push_str(REDACTED);
        at = r.end;
    }
    out.push_str(text.get(at..).unwrap_or(""));
    (Cow::Owned(out), found)
}

/// The rules one by one, in order (what decides; [`detect`] first rules
/// out text no rule can match).
fn detect_by_rules(text: &str) -> Option<SecretKind> {
    spans(text, true).first().map(|r| r.kind)
}

/// What each rule finds, rule by rule; only the first find when `first`.
fn spans(text: &str, first: bool) -> Vec<Redaction> {
    let rules = &*RULES;
    let mut out = Vec::new();
    let mut push = |kind, (start, end): (usize, usize)| {
        out.push(Redaction { kind, start, end });
        first
    };
    for (kind, re) in &rules.plain {
        match kind {
            SecretKind::CredentialAssignment => {
                for cap in re.captures_iter(text) {
                    let (Some(name), Some(value)) = (cap.get(1), cap.get(2)) else {
                        continue;
                    };
                    if let Some(span) =
                        assigned_value(text, name.start(), name.as_str(), value.start())
                        && push(*kind, span)
                    {
                        return out;
                    }
                }
            }
            SecretKind::PemPrivateKey => {
                // A header closed by a quote or `...` is a marker a
                // program looks for, not a key.
                for m in re.find_iter(text) {
                    let after = text.get(m.end()..).unwrap_or("");
                    if !after.starts_with(['"', '\''])
                        && !after.starts_with("...")
                        && push(*kind, (m.start(), pem_end(text, m.end())))
                    {
                        return out;
                    }
                }
            }
            _ => {
                for m in re.find_iter(text) {
                    if !is_sample_token(m.as_str(), text.get(m.end()..).unwrap_or(""))
                        && push(*kind, (m.start(), m.end()))
                    {
                        return out;
                    }
                }
            }
        }
    }
    for cap in rules.bearer.captures_iter(text) {
        let Some(token) = cap.get(1) else { continue };
        let has_digit = token.as_str().bytes().any(|b| b.is_ascii_digit());
        if ((token.len() >= 16 && has_digit) || token.len() >= 32)
            && push(SecretKind::BearerToken, (token.start(), token.end()))
        {
            return out;
        }
    }
    out
}

/// Whether a token a rule matched is a sample, not a credential: its
/// body one repeated character (`ghp_xxxx…`), or a host name's first
/// label (`sk-ecdsa-sha2-nistp256@openssh.com`).
fn is_sample_token(token: &str, after: &str) -> bool {
    let body = token.rsplit(['_', '-']).next().unwrap_or(token);
    let mut chars = body.chars();
    let repeated = chars
        .next()
        .is_some_and(|first| body.len() >= 8 && chars.all(|c| c == first));
    repeated || after.starts_with('@')
}

/// Where a PEM block that begins before `from` ends: after its
/// `-----END …-----` line, or at the end of the text without one.
fn pem_end(text: &str, from: usize) -> usize {
    let rest = text.get(from..).unwrap_or("");
    rest.find("-----END")
        .and_then(|end| {
            let after = end + "-----END".len();
            rest.get(after..)?
                .find("-----")
                .map(|close| from + after + close + "-----".len())
        })
        .unwrap_or(text.len())
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

    proptest! {
        /// Redacted text holds nothing a rule finds: redacting twice
        /// changes nothing, and no range reaches past the text.
        #[test]
        fn redaction_leaves_nothing_to_find(parts in proptest::collection::vec(prop::sample::select(vec![
            " ", "\n", "password", "db_password", " = ", ": ", "\"", "'", "hunter2", "x",
            "os.environ", "(", ")", "[", "Bearer ", "abcdefghijklmnop12345", "sk-",
            "AKIAABCDEFGHIJ234567", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key", "=>", ":=", "None", "é",
            "{password}", "***", "SECRET_KEY", "[REDACTED]", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIx.dozjgNryP4J3",
        ]), 0..14)) {
            let text: String = parts.concat();
            let (once, found) = redact(&text);
            for r in &found {
                prop_assert!(r.start < r.end && r.end <= text.len(), "{:?} in {:?}", r, text);
            }
            prop_assert_eq!(found.is_empty(), detect(&text).is_none(), "{:?}", text);
            prop_assert_eq!(find(&once), Vec::new(), "{:?} -> {:?}", text, once);
        }
    }

    /// Code that names a credential without holding one is no secret.
    #[test]
    fn code_that_names_a_credential_passes() {
        for text in [
            "password = db.Column(db.String(128), nullable=False)",
            "SECRET_KEY = os.environ['SECRET_KEY']",
            "SECRET_KEY = os.environ.get(\"SECRET_KEY\")",
            "password = request.form['password']",
            "token = get_token()",
            "def login(username: str, password: str) -> bool:",
            "password: Optional[str] = None",
            "    api_key: String,",
            "fn connect(password: &str)",
            "user.password = hashed_password",
            "conn = connect(host=host, password=password)",
            "password=self.password,",
            "password: ${{ secrets.DB_PASSWORD }}",
            "export DB_PASSWORD=$DB_PASSWORD",
            "password = getpass.getpass()",
            "const apiKey: string = process.env.API_KEY;",
            "let token: Option<Token> = None;",
            "\"password\": \"{password}\",",
            "password = \"\"",
            "password: \"********\"",
            "if password == other:",
            "password_hash = generate_password_hash(password)",
            "github_token = userToken",
            "    my_private_key: EphemeralPrivateKey,",
            "let bob_secret = priv_key_from_bytes",
            "pub const EC_R_INVALID_PRIVATE_KEY: i32 = 113;",
            "    len_secret: usize,",
            "let next_token = match &self.sampling {",
            "    cls_token: Tensor,",
            "let next_token = logits",
            "pub log_passwd: __u32,",
            "pub const kCFURLComponentPassword: CFIndex = 6;",
            "        colon_token: Colon {",
            "\"HTTP/1.1 200 OK\\r\\nAccess-Control-Allow-Credentials : true\\r\\n\"",
            "buf.extend_from_slice(b\"Proxy-Authorization: \");",
            "    NEW_TOKEN = 0x07,",
            "    HttpHeaderAuthorization = 24,",
            "                        semi_token: semi,",
            "            self.continuation_token = field;",
            "    generate_private_key: x25519_generate_private_key,",
            "        fabric_session_token: impl Into<String>,",
            "    Password = \"password\",",
            "        let pad_token = \"[PAD]\";",
            "            word_delimiter_token: \"|\".to_string(),",
            "?access_token=ACCESS_TOKEN>",
            "        AccessToken: WBEM_128BITS,",
            "        :param request_token: A previous request token for OAuth 1.",
            "        auth_credential: The credential to exchange.",
            "    headers = {\"Authorization\": f\"Bearer {credential.oauth2.access_token}\"}",
            "    \"api_key\": \"LITELLM_PROXY_API_KEY\",",
            "  api_client.api_key = 'TEST_API_KEY'",
            "  client = Client(api_key=\"test-key\")",
            "    api_key=\"your-api-key\"",
            "    \"next_page_token\": \"token_next_123\",",
            "  \"refresh_token\": \"refreshToken\",",
            "            password = passphrase",
            "_SK_SSH_ECDSA_NISTP256 = b\"sk-ecdsa-sha2-nistp256@openssh.com\"",
            "    \" ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"",
            "_PKCS1_MARKER = (\"-----BEGIN RSA PRIVATE KEY-----\", \"-----END RSA PRIVATE KEY-----\")",
            "    private_key=\"-----BEGIN PRIVATE KEY-----...\",",
            "Password: <your password here>",
        ] {
            assert_eq!(find(text), Vec::new(), "{text}");
            assert_eq!(detect(text), None, "{text}");
        }
    }

    /// Each secret is replaced where it is, and only it; the ranges are
    /// in the text as given.
    #[test]
    fn secrets_are_redacted_in_place() {
        let cases: [(&str, &str, SecretKind); 8] = [
            (
                "app.config['X'] = 1\nSECRET_KEY = 'django-insecure-abc123'\nDEBUG = True",
                "app.config['X'] = 1\nSECRET_KEY = '[REDACTED]'\nDEBUG = True",
                SecretKind::CredentialAssignment,
            ),
            (
                "{\"user\": \"bob\", \"password\": \"hunter2\"}",
                "{\"user\": \"bob\", \"password\": \"[REDACTED]\"}",
                SecretKind::CredentialAssignment,
            ),
            (
                "my password: correct horse battery\nsee you",
                "my password: [REDACTED]\nsee you",
                SecretKind::CredentialAssignment,
            ),
            (
                "'api_key' => 'k-123456',",
                "'api_key' => '[REDACTED]',",
                SecretKind::CredentialAssignment,
            ),
            (
                "curl -H 'Authorization: Bearer abcdefghij0123456789' x",
                // A bare value runs to the end of its line.
                "curl -H 'Authorization: [REDACTED]",
                SecretKind::CredentialAssignment,
            ),
            (
                "use sk-abcdefghijklmnop1234 for it",
                "use [REDACTED] for it",
                SecretKind::OpenAiKey,
            ),
            (
                "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nthanks",
                "key:\n[REDACTED]\nthanks",
                SecretKind::PemPrivateKey,
            ),
            (
                "token is Bearer abcdefghij0123456789 ok",
                "token is Bearer [REDACTED] ok",
                SecretKind::BearerToken,
            ),
        ];
        for (text, want, kind) in cases {
            let (got, found) = redact(text);
            assert_eq!(got, want, "{text}");
            assert_eq!(found.len(), 1, "{text}");
            assert_eq!(found[0].kind, kind, "{text}");
            let r = found[0];
            assert_eq!(
                format!("{}{REDACTED}{}", &text[..r.start], &text[r.end..]),
                want
            );
        }
        // Two secrets, two ranges, in order.
        let (got, found) =
            redact("a AKIAABCDEFGHIJ234567 b ghp_abcdefghijklmnopqrstuvwxyz0123456789");
        assert_eq!(got, "a [REDACTED] b [REDACTED]");
        assert_eq!(
            found.iter().map(|r| r.kind).collect::<Vec<_>>(),
            [SecretKind::AwsAccessKeyId, SecretKind::GithubToken]
        );
        assert_eq!(redact("nothing here").0, Cow::Borrowed("nothing here"));
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
