//! Whether an assignment to a credential's name holds a credential: the
//! value check of the assignment rules (see the parent module's docs),
//! which lets code that names a credential without holding one pass.

/// Words that, as an assignment's whole value, are code: keywords and
/// types, never a credential.
const CODE_WORDS: &[&str] = &[
    "none",
    "null",
    "nil",
    "true",
    "false",
    "undefined",
    "str",
    "string",
    "bytes",
    "int",
    "integer",
    "bool",
    "boolean",
    "any",
    "unknown",
    "object",
    "optional",
    "secretstr",
    "self",
    "this",
    "required",
    "i8",
    "i16",
    "i32",
    "i64",
    "i128",
    "isize",
    "u8",
    "u16",
    "u32",
    "u64",
    "u128",
    "usize",
    "f32",
    "f64",
    "char",
    "void",
    "float",
    "double",
    "long",
    "short",
    "number",
    "dict",
    "list",
    "tuple",
    "match",
    "if",
    "loop",
    "while",
    "for",
    "async",
    "await",
    "move",
    "new",
    "lambda",
    "yield",
    "function",
    "return",
    "not",
    "typeof",
    "impl",
    "dyn",
    "fn",
    "mut",
    "ref",
    "ident",
    "expr",
    "ty",
];

/// The words a variable named for a credential holds.
const CREDENTIAL_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "credential",
];

/// Keywords that open a declaration in code: after one, a bare value is
/// an expression (a literal secret would be quoted).
const DECLARATIONS: &[&str] = &[
    "let",
    "const",
    "var",
    "val",
    "pub",
    "static",
    "auto",
    "final",
    "private",
    "public",
    "protected",
    "readonly",
    ":param",
    ":type",
    "@param",
];

/// The range of the secret an assignment to `name` (at byte `name_at`)
/// holds, its value starting at byte `at`: inside the quotes of a quoted
/// literal, or the rest of the line of a bare value; `None` when the
/// value is code that names a credential without holding one (see the
/// module docs).
pub(super) fn assigned_value(
    text: &str,
    name_at: usize,
    name: &str,
    at: usize,
) -> Option<(usize, usize)> {
    let line = text.get(at..)?;
    let line = &line[..line.find(['\n', '\r']).unwrap_or(line.len())];
    // A string prefix (`f"…"`, `b'…'`, `r"…"`) belongs to the literal.
    let prefix = line
        .find(['"', '\''])
        .filter(|&i| i <= 2 && line[..i].chars().all(|c| "fbruFBRU".contains(c)))
        .unwrap_or(0);
    let (at, line) = (at + prefix, &line[prefix..]);
    let quote = line.chars().next()?;
    if matches!(quote, '"' | '\'' | '`') {
        // Unterminated on its line: the quote closes a string the name
        // was inside (`b"Authorization: "`), it opens no literal.
        let inner = &line[1..];
        let inner = &inner[..inner.find(quote)?];
        let masked = inner
            .chars()
            .all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '•' | '#' | '-' | '_' | ' '));
        // A template or a placeholder (`{x}`, `${X}`, `<x>`, `%s`, `[PAD]`,
        // the name itself), too short to be a secret, or what a
        // redaction left (`[REDACTED]`: redacting twice finds nothing the
        // second time).
        let template = inner.starts_with(['{', '$', '<', '%', '['])
            || (inner.contains('{') && inner.contains('}'))
            || inner.len() < 3
            || is_placeholder(inner, name);
        return (!masked && !template).then_some((at + 1, at + 1 + inner.len()));
    }
    let before = text.get(..name_at).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let declared = before[line_start..]
        .split_whitespace()
        .next()
        .is_some_and(|w| DECLARATIONS.contains(&w));
    if declared {
        return None;
    }
    let value = line.trim_end();
    let end = value
        .find(|c: char| c.is_whitespace() || ",;)]}>\"'\\".contains(c))
        .unwrap_or(value.len());
    let word = value[..end].trim_end_matches(['.', ':']);
    // A lower-case word alone on an indented line is a variable in code
    // (`    password = passphrase`).
    let indented = before[line_start..].starts_with([' ', '\t']);
    let variable = indented && end == value.len() && word.chars().all(|c| c.is_ascii_lowercase());
    let description = DESCRIPTIONS.contains(&word.to_ascii_lowercase().as_str());
    (!variable && !description && !is_code(word, value[end..].trim_start(), name))
        .then_some((at, at + value.len()))
}

/// Words that mark a quoted value as a stand-in for a credential.
const PLACEHOLDERS: &[&str] = &[
    "fake",
    "dummy",
    "example",
    "placeholder",
    "your",
    "sample",
    "redacted",
    "test_",
    "test-",
    "_test",
    "-test",
];

/// Whether a quoted value stands in for a credential: it names one (the
/// assignment's own last word, as in `page_token = "token_next_123"`),
/// says it is a stand-in (`"test-api-key"`, `"your-key"`), or is a name
/// (`"TEST_API_KEY"`, `"SECRET"`, `"refreshToken"`: letters and `_`,
/// all capitals or with a hump or an underscore, no digit).
fn is_placeholder(inner: &str, name: &str) -> bool {
    let lower = inner.to_ascii_lowercase();
    let name = name.to_ascii_lowercase();
    let last = name.rsplit(['_', '-', ' ']).next().unwrap_or(&name);
    let letters = inner.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
    let named = letters
        && (inner.chars().all(|c| !c.is_ascii_lowercase())
            || inner.contains('_')
            || inner
                .as_bytes()
                .windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase()));
    lower.contains(last) || PLACEHOLDERS.iter().any(|p| lower.contains(p)) || named
}

/// Words that open a description, never a credential (a docstring's
/// `api_key: The API key to use`).
const DESCRIPTIONS: &[&str] = &["a", "an", "the", "if", "whether", "optional", "used", "to"];

/// Whether a bare assigned value (its first word, then the rest of its
/// line) is code rather than a credential.
fn is_code(word: &str, rest: &str, name: &str) -> bool {
    let Some(first) = word.chars().next() else {
        return true;
    };
    let ident = |s: &str| {
        let mut c = s.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let lower = word.to_ascii_lowercase();
    let camel = word
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    // A type name: capitalised letters (no digits: a password usually
    // has one) in CamelCase (`EphemeralPrivateKey`) or followed by code
    // (`Tensor,`, `CFIndex = 6`, `Colon {`); or a variable in snake_case
    // or SCREAMING_CASE (`priv_key_from_bytes`, words without digits), or
    // private (`_x`, `__u32`).
    let camel_type = first.is_ascii_uppercase()
        && word.chars().all(|c| c.is_ascii_alphabetic())
        && (camel || rest.starts_with([',', ';', '{', '=', ')', '>']));
    let snake_variable = ident(word)
        && word.contains('_')
        && word
            .split('_')
            .all(|w| w.chars().all(|c| c.is_ascii_alphabetic()));
    // A field or an argument set from a variable or a number, in code: a
    // name in code style (`semi_token`, `AccessToken`) given an
    // identifier followed by more code (`semi_token: semi,`,
    // `self.continuation_token = field;`); or a number ending a
    // constant (`NEW_TOKEN = 0x07,`).
    let code_name = name.contains('_')
        || name
            .as_bytes()
            .windows(2)
            .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    let more_code = rest.starts_with([',', ';', ')', '=', '.', '{', '(']);
    let number = first.is_ascii_digit() && word.chars().all(|c| c.is_ascii_alphanumeric());
    let field_from_code = more_code && ((code_name && ident(word)) || number);
    camel_type
        || snake_variable
        || field_from_code
        || "([{<$%@&*=!?.,;:#\\/|~^_".contains(first)
        || word.contains(['(', '[', '<', '{'])
        || word.contains("::")
        || word.contains("->")
        || (word.contains('.') && word.split('.').all(ident))
        || CODE_WORDS.contains(&lower.as_str())
        || lower == name.to_ascii_lowercase()
        || (ident(word)
            && CREDENTIAL_WORDS.iter().any(|w| lower.contains(w))
            && (word.contains('_') || camel || CREDENTIAL_WORDS.contains(&lower.as_str())))
}
