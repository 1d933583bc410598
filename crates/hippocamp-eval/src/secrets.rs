//! How often the secret rules fire on code that holds no secret: source
//! files of installed packages, cut into turns the way a technical
//! conversation pastes them, each run through [`hippocamp_core::secrets`].
//!
//! Package sources hold few real credentials (test fixtures do: a PEM
//! key in a TLS crate's tests, an example AWS key in docs), so the rate is
//! an upper bound on false positives; the examples show what fired, to
//! tell the two apart. The report also counts the assignments the value
//! check let through (`password = db.Column(...)`): what a rule on the
//! name alone would have flagged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hippocamp_core::secrets;
use serde::Serialize;

use crate::EvalError;

/// What to scan and how to cut it.
#[derive(Debug, Clone)]
pub struct SecretsOptions {
    /// File name endings to read (`rs`, `py`).
    pub extensions: Vec<String>,
    /// The most bytes of one turn: a file is cut at line ends into turns
    /// of at most this many bytes (a longer line is a turn of its own).
    pub turn_bytes: usize,
    /// Stop after this many files (all when `None`).
    pub max_files: Option<usize>,
    /// How many findings to show.
    pub examples: usize,
}

impl Default for SecretsOptions {
    fn default() -> Self {
        Self {
            extensions: vec!["rs".into(), "py".into()],
            turn_bytes: 4096,
            max_files: None,
            examples: 20,
        }
    }
}

/// One finding, to judge by eye.
#[derive(Debug, Clone, Serialize)]
pub struct Example {
    /// The file.
    pub path: String,
    /// Its line (1-based).
    pub line: usize,
    /// The rule.
    pub kind: String,
    /// The line, cut to 160 bytes.
    pub text: String,
}

/// The figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SecretsReport {
    /// Files read (valid UTF-8 with a chosen ending).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Turns they were cut into.
    pub turns: u64,
    /// Turns with at least one finding: what would be stored with a
    /// redaction.
    pub flagged_turns: u64,
    /// `flagged_turns / turns`.
    pub flagged_rate: f64,
    /// Findings by rule.
    pub by_kind: BTreeMap<String, u64>,
    /// Turns where an assignment named a credential but its value was
    /// code, so nothing fired: flagged by a rule on the name alone.
    pub passed_as_code_turns: u64,
    /// The first findings, one per file.
    pub examples: Vec<Example>,
}

impl std::fmt::Display for SecretsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} files, {} bytes, {} turns: {} flagged ({:.4}); {} where a credential was named and its value was code",
            self.files,
            self.bytes,
            self.turns,
            self.flagged_turns,
            self.flagged_rate,
            self.passed_as_code_turns
        )?;
        for (kind, n) in &self.by_kind {
            writeln!(f, "  {kind:<24} {n}")?;
        }
        for e in &self.examples {
            writeln!(f, "{}:{} {}: {}", e.path, e.line, e.kind, e.text)?;
        }
        Ok(())
    }
}

/// Scans every file under `roots` with a chosen ending, in path order.
pub fn run(roots: &[PathBuf], opts: &SecretsOptions) -> Result<SecretsReport, EvalError> {
    let mut files = Vec::new();
    for root in roots {
        collect(root, &opts.extensions, &mut files)?;
    }
    files.sort();
    if let Some(max) = opts.max_files {
        files.truncate(max);
    }
    let mut report = SecretsReport::default();
    for path in &files {
        // Not UTF-8: not text a conversation would hold.
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        report.files += 1;
        report.bytes += text.len() as u64;
        for (first_line, turn) in turns(&text, opts.turn_bytes) {
            report.turns += 1;
            let found = secrets::find(turn);
            if secrets::code_assignments(turn) > 0 {
                report.passed_as_code_turns += 1;
            }
            if found.is_empty() {
                continue;
            }
            report.flagged_turns += 1;
            for r in &found {
                *report.by_kind.entry(r.kind.to_string()).or_default() += 1;
                // One example per file: a generated file repeats itself.
                if report.examples.len() < opts.examples
                    && report
                        .examples
                        .last()
                        .is_none_or(|e: &Example| Path::new(&e.path) != path)
                {
                    report.examples.push(example(path, turn, first_line, r));
                }
            }
        }
    }
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    {
        report.flagged_rate = if report.turns == 0 {
            0.0
        } else {
            report.flagged_turns as f64 / report.turns as f64
        };
    }
    Ok(report)
}

fn example(path: &Path, turn: &str, first_line: usize, r: &secrets::Redaction) -> Example {
    let before = turn.get(..r.start).unwrap_or("");
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let rest = turn.get(line_start..).unwrap_or("");
    let line = rest.lines().next().unwrap_or("");
    let mut cut = line.len().min(160);
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    Example {
        path: path.display().to_string(),
        line: first_line + before.matches('\n').count(),
        kind: r.kind.to_string(),
        text: line[..cut].to_owned(),
    }
}

/// `text` cut at line ends into pieces of at most `max` bytes (a longer
/// line alone), each with the number of its first line.
fn turns(text: &str, max: usize) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let (mut start, mut end, mut line, mut start_line) = (0, 0, 1, 1);
    for piece in text.split_inclusive('\n') {
        if end > start && end + piece.len() - start > max {
            out.push((start_line, &text[start..end]));
            (start, start_line) = (end, line);
        }
        end += piece.len();
        line += 1;
    }
    if end > start {
        out.push((start_line, &text[start..end]));
    }
    out
}

fn collect(dir: &Path, extensions: &[String], out: &mut Vec<PathBuf>) -> Result<(), EvalError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| io(dir, &e))?;
    if meta.is_file() {
        out.push(dir.to_path_buf());
        return Ok(());
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| io(&d, &e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io(&d, &e))?;
            let kind = entry.file_type().map_err(|e| io(&entry.path(), &e))?;
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file()
                && path
                    .extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| extensions.iter().any(|x| x == e))
            {
                out.push(path);
            }
        }
    }
    Ok(())
}

fn io(path: &Path, e: &std::io::Error) -> EvalError {
    EvalError::Io(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_cut_at_line_ends_within_the_bound() {
        let text = "aaaa\nbbbb\ncccc\ndddddddddddd\ne";
        let t = turns(text, 10);
        assert_eq!(t.iter().map(|(_, s)| *s).collect::<String>(), text);
        assert_eq!(
            t,
            [
                (1, "aaaa\nbbbb\n"),
                (3, "cccc\n"),
                (4, "dddddddddddd\n"),
                (5, "e")
            ]
        );
    }

    #[test]
    fn a_tree_is_scanned_and_findings_are_shown() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        std::fs::write(
            dir.path().join("pkg/models.py"),
            "class User:\n    password = db.Column(db.String(128))\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("pkg/settings.py"),
            "DEBUG = True\nSECRET_KEY = 'django-insecure-0123456789'\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("pkg/notes.txt"), "password: x\n").unwrap();
        let r = run(&[dir.path().to_path_buf()], &SecretsOptions::default()).unwrap();
        assert_eq!((r.files, r.turns, r.flagged_turns), (2, 2, 1));
        assert_eq!(r.passed_as_code_turns, 1);
        assert_eq!(r.by_kind["credential_assignment"], 1);
        assert_eq!(r.examples[0].line, 2);
        assert!(r.examples[0].path.ends_with("settings.py"));
        assert!((r.flagged_rate - 0.5).abs() < 1e-9);
    }
}
