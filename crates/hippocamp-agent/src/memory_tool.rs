//! Anthropic's memory tool (`memory_20250818`) on versioned artifacts.
//!
//! The model keeps files under `/memories` through six commands (`view`,
//! `create`, `str_replace`, `insert`, `delete`, `rename`); this module
//! executes them against the user's artifact scope, under the reserved
//! name prefix [`PREFIX`] (`/memories/notes/a.md` is the artifact
//! `.memories/notes/a.md` of `(app, user)`). Directories are implied by
//! names. What it guarantees:
//!
//! - every `create`, `str_replace` and `insert` writes a new immutable
//!   version, so a file's history is its versions; `delete` erases every
//!   version of the file (or of every file under a directory), and
//!   `rename` writes the text under the new name, then erases the old
//!   name's versions;
//! - every path is checked before anything is read: exactly `/memories` or
//!   under `/memories/` (never `/memories_other`), no `.` or `..` segment,
//!   no empty segment, no backslash, no control character, no
//!   percent-encoded character; the root cannot be created, renamed or
//!   deleted; errors name the `/memories` path the model gave, never a
//!   host path or an artifact name;
//! - files are UTF-8 text (at most [`MAX_LINES`] lines; bytes bounded by
//!   the artifact store's own limit);
//! - the results read like the reference implementation's
//!   (`BetaLocalFilesystemMemoryTool` of Anthropic's SDK), so a model
//!   tuned on it meets the same text.
//!
//! The files' text is indexed for memory search by the services' artifact
//! layer, not here: every path that writes or erases an artifact version
//! passes through it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Bytes;
use hippocamp_artifacts::{
    ArtifactName, ArtifactScope, ArtifactStore, Body, DeleteSelector, MimeType, PageRequest,
    PutOptions, Selector,
};
use hippocamp_core::{CallOptions, Error, Field, MemoryScope, Problem, Result};
use serde::Deserialize;

/// The artifact-name prefix of memory files.
pub const PREFIX: &str = ".memories";
/// The root the model sees.
pub const ROOT: &str = "/memories";
/// Most lines of a memory file.
pub const MAX_LINES: usize = 999_999;
/// Names one directory listing (or a directory delete or rename) reads.
pub const MAX_FILES: usize = 10_000;
/// The MIME type memory files are stored with.
pub const MIME: &str = "text/plain; charset=utf-8";
const WIDTH: usize = 6;

/// The capabilities rows of the memory tool's fixed bounds.
pub fn fixed_limits() -> Vec<hippocamp_core::LimitInfo> {
    use hippocamp_core::LimitInfo;
    vec![
        LimitInfo::fixed(
            "memory_tool.max_lines",
            MAX_LINES as u64,
            1,
            "lines of one /memories file",
        ),
        LimitInfo::fixed(
            "memory_tool.max_files",
            MAX_FILES as u64,
            1,
            "files one directory view, delete or rename reads",
        ),
    ]
}

/// One command, as the model sends it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(tag = "command", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// A directory listing, or a file with line numbers.
    View {
        /// The path.
        path: String,
        /// `[first, last]` lines (1-based; `last` -1: to the end).
        #[serde(default)]
        view_range: Option<[i64; 2]>,
    },
    /// A new file (refused when the path exists).
    Create {
        /// The path.
        path: String,
        /// Its text.
        file_text: String,
    },
    /// Replaces the one occurrence of `old_str`.
    StrReplace {
        /// The path.
        path: String,
        /// Text that occurs exactly once.
        old_str: String,
        /// Its replacement.
        new_str: String,
    },
    /// Inserts text after line `insert_line` (0: at the top).
    Insert {
        /// The path.
        path: String,
        /// The line after which to insert.
        insert_line: i64,
        /// The text.
        insert_text: String,
    },
    /// Erases a file, or a directory and everything under it.
    Delete {
        /// The path.
        path: String,
    },
    /// Moves a file or a directory.
    Rename {
        /// The current path.
        old_path: String,
        /// The new path (must not exist).
        new_path: String,
    },
}

/// A checked `/memories` path: the segments under the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPath {
    shown: String,
    segments: Vec<String>,
}

fn refuse(msg: impl Into<String>) -> Error {
    Error::invalid(Field::Path, Problem::Malformed(msg.into()))
}

impl MemoryPath {
    /// Checks `path` (see the module docs).
    pub fn parse(path: &str) -> Result<Self> {
        let trimmed = path
            .strip_suffix('/')
            .filter(|p| !p.is_empty())
            .unwrap_or(path);
        let rest = if trimmed == ROOT {
            ""
        } else if let Some(r) = trimmed.strip_prefix("/memories/") {
            r
        } else {
            return Err(refuse(format!(
                "Path must start with /memories, got: {path}"
            )));
        };
        if has_percent_escape(path) {
            return Err(refuse(format!(
                "Path {path} holds a percent-encoded character; write it as it is"
            )));
        }
        let mut segments = Vec::new();
        if !rest.is_empty() {
            for seg in rest.split('/') {
                if seg.is_empty() || seg == "." || seg == ".." {
                    return Err(refuse(format!(
                        "Path {path} would escape /memories directory"
                    )));
                }
                hippocamp_core::ident::check_segment(Field::Path, seg)
                    .map_err(|_| refuse(format!("Path {path} has an invalid segment `{seg}`")))?;
                segments.push(seg.to_owned());
            }
        }
        let p = Self {
            shown: if segments.is_empty() {
                ROOT.to_owned()
            } else {
                format!("{ROOT}/{}", segments.join("/"))
            },
            segments,
        };
        if !p.is_root() {
            ArtifactName::new(p.name_text())
                .map_err(|_| refuse(format!("Path {path} is too long")))?;
        }
        Ok(p)
    }

    /// Whether it is `/memories` itself.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    /// The path as the model reads it.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn name_text(&self) -> String {
        if self.segments.is_empty() {
            PREFIX.to_owned()
        } else {
            format!("{PREFIX}/{}", self.segments.join("/"))
        }
    }

    fn name(&self) -> Result<ArtifactName> {
        ArtifactName::new(self.name_text())
    }

    /// The artifact-name prefix of everything under it.
    fn dir_prefix(&self) -> String {
        format!("{}/", self.name_text())
    }

    /// The `/memories` path of an artifact name under [`PREFIX`].
    fn of_name(name: &str) -> Option<String> {
        name.strip_prefix(PREFIX)
            .and_then(|r| r.strip_prefix('/'))
            .map(|r| format!("{ROOT}/{r}"))
    }
}

fn has_percent_escape(s: &str) -> bool {
    let b = s.as_bytes();
    b.windows(3)
        .any(|w| w[0] == b'%' && w[1].is_ascii_hexdigit() && w[2].is_ascii_hexdigit())
}

/// What the tool needs of one user's artifacts: small, so a governed
/// store (the server's route) and a tool context that checks the declared
/// capabilities (the runner's and MCP's `memory` built-in) both provide it.
#[async_trait::async_trait]
pub trait Files: Send + Sync {
    /// The latest bytes of `name`; `None` when it has no version.
    async fn read(&self, name: &ArtifactName) -> Result<Option<Bytes>>;
    /// Puts `text` as a new version of `name`; the version.
    async fn write(&self, name: &ArtifactName, text: &str) -> Result<u64>;
    /// One page of the scope's names after `cursor`, and the next cursor.
    async fn names(
        &self,
        cursor: Option<ArtifactName>,
    ) -> Result<(Vec<ArtifactName>, Option<ArtifactName>)>;
    /// Erases every version of `name`.
    async fn erase(&self, name: &ArtifactName) -> Result<()>;
}

fn put_options(call: CallOptions) -> Result<PutOptions> {
    Ok(PutOptions {
        mime_type: MimeType::new(MIME)?,
        metadata: hippocamp_core::Metadata::new(),
        call,
    })
}

/// [`Files`] on an artifact store, in a user's scope.
#[derive(Debug, Clone)]
pub struct StoreFiles<'a> {
    artifacts: &'a dyn ArtifactStore,
    scope: ArtifactScope,
    call: CallOptions,
}

impl<'a> StoreFiles<'a> {
    /// `scope`'s user artifacts in `artifacts` (the governed handle).
    pub fn new(artifacts: &'a dyn ArtifactStore, scope: &MemoryScope, call: CallOptions) -> Self {
        Self {
            artifacts,
            scope: ArtifactScope::User {
                app: scope.app().clone(),
                user: scope.user().clone(),
            },
            call,
        }
    }
}

#[async_trait::async_trait]
impl Files for StoreFiles<'_> {
    async fn read(&self, name: &ArtifactName) -> Result<Option<Bytes>> {
        match self
            .artifacts
            .get(&self.scope, name, Selector::Latest, None, &self.call)
            .await
        {
            Ok(r) => Ok(Some(r.bytes().await?)),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn write(&self, name: &ArtifactName, text: &str) -> Result<u64> {
        let body = Body::from(text.as_bytes().to_vec());
        let meta = self
            .artifacts
            .put(&self.scope, name, body, &put_options(self.call)?)
            .await?;
        Ok(meta.version)
    }

    async fn names(
        &self,
        cursor: Option<ArtifactName>,
    ) -> Result<(Vec<ArtifactName>, Option<ArtifactName>)> {
        let page = PageRequest {
            cursor,
            limit: None,
        };
        let p = self
            .artifacts
            .list_names(&self.scope, &page, &self.call)
            .await?;
        Ok((p.items, p.next_cursor))
    }

    async fn erase(&self, name: &ArtifactName) -> Result<()> {
        self.artifacts
            .delete(&self.scope, name, DeleteSelector::All, &self.call)
            .await?;
        Ok(())
    }
}

/// [`Files`] through a tool context: every operation checked against the
/// capabilities the `memory` built-in declares, in the invocation's user
/// scope, with its context effects recorded.
#[derive(Debug, Clone, Copy)]
pub struct ContextFiles<'a>(pub &'a crate::context::ToolContext);

#[async_trait::async_trait]
impl Files for ContextFiles<'_> {
    async fn read(&self, name: &ArtifactName) -> Result<Option<Bytes>> {
        let max = crate::builtin::MAX_ARTIFACT_BYTES;
        match self.0.artifact_get(None, name, Selector::Latest, max).await {
            Ok((_, bytes)) => Ok(Some(bytes)),
            Err(crate::error::AgentError::Service(Error::NotFound(_))) => Ok(None),
            Err(e) => Err(e.into_service_error()),
        }
    }

    async fn write(&self, name: &ArtifactName, text: &str) -> Result<u64> {
        let bytes = Bytes::from(text.to_owned());
        let opts = put_options(CallOptions::default())?;
        Ok(self
            .0
            .artifact_put(None, name, bytes, opts)
            .await
            .map_err(crate::error::AgentError::into_service_error)?
            .version)
    }

    async fn names(
        &self,
        cursor: Option<ArtifactName>,
    ) -> Result<(Vec<ArtifactName>, Option<ArtifactName>)> {
        let page = PageRequest {
            cursor,
            limit: None,
        };
        let p = self
            .0
            .artifact_list(None, &page)
            .await
            .map_err(crate::error::AgentError::into_service_error)?;
        Ok((p.items, p.next_cursor))
    }

    async fn erase(&self, name: &ArtifactName) -> Result<()> {
        self.0
            .artifact_delete(None, name, DeleteSelector::All)
            .await
            .map_err(crate::error::AgentError::into_service_error)?;
        Ok(())
    }
}

/// The tool on one user's files.
#[derive(Debug, Clone)]
pub struct MemoryTool<F> {
    files: F,
}

impl<F: Files> MemoryTool<F> {
    /// The tool on `files`.
    pub fn new(files: F) -> Self {
        Self { files }
    }

    /// Runs `command`; the text the model reads.
    pub async fn execute(&self, command: &Command) -> Result<String> {
        match command {
            Command::View { path, view_range } => {
                self.view(&MemoryPath::parse(path)?, *view_range).await
            }
            Command::Create { path, file_text } => {
                self.create(&MemoryPath::parse(path)?, file_text).await
            }
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => {
                self.str_replace(&MemoryPath::parse(path)?, old_str, new_str)
                    .await
            }
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => {
                self.insert(&MemoryPath::parse(path)?, *insert_line, insert_text)
                    .await
            }
            Command::Delete { path } => self.delete(&MemoryPath::parse(path)?).await,
            Command::Rename { old_path, new_path } => {
                let (old, new) = (MemoryPath::parse(old_path)?, MemoryPath::parse(new_path)?);
                self.rename(&old, &new).await
            }
        }
    }

    /// The file's latest text, `None` when there is no such file.
    async fn read(&self, p: &MemoryPath) -> Result<Option<String>> {
        if p.is_root() {
            return Ok(None);
        }
        let Some(bytes) = self.files.read(&p.name()?).await? else {
            return Ok(None);
        };
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| refuse(format!("The file {} is not UTF-8 text", p.shown())))
    }

    async fn write(&self, p: &MemoryPath, text: &str) -> Result<u64> {
        if text.split('\n').count() > MAX_LINES {
            return Err(refuse(format!(
                "File {} would exceed the maximum line limit of 999,999 lines.",
                p.shown()
            )));
        }
        self.files.write(&p.name()?, text).await
    }

    /// The names of every file under `p` (a directory), without reading
    /// them: what existence, `delete` and `rename` need.
    async fn names_under(&self, p: &MemoryPath) -> Result<Vec<String>> {
        let prefix = p.dir_prefix();
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let (names, next) = self.files.names(cursor).await?;
            out.extend(
                names
                    .iter()
                    .filter(|n| n.as_str().starts_with(&prefix))
                    .map(|n| n.as_str().to_owned()),
            );
            if out.len() > MAX_FILES {
                return Err(refuse(format!(
                    "{} holds more than 10,000 files",
                    p.shown()
                )));
            }
            match next {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
    }

    /// Every file under `p` with its size: what a listing shows.
    async fn files_under(&self, p: &MemoryPath) -> Result<BTreeMap<String, u64>> {
        let mut out = BTreeMap::new();
        for name in self.names_under(p).await? {
            if let Some(bytes) = self.files.read(&ArtifactName::new(name.as_str())?).await? {
                out.insert(name, bytes.len() as u64);
            }
        }
        Ok(out)
    }

    fn missing(p: &MemoryPath) -> Error {
        refuse(format!(
            "The path {} does not exist. Please provide a valid path.",
            p.shown()
        ))
    }

    async fn view(&self, p: &MemoryPath, range: Option<[i64; 2]>) -> Result<String> {
        if let Some(text) = self.read(p).await? {
            let lines: Vec<&str> = text.split('\n').collect();
            let (start, shown): (usize, &[&str]) = match range {
                Some([first, last]) => {
                    let start = usize::try_from(first.max(1) - 1)
                        .unwrap_or(0)
                        .min(lines.len());
                    let end = if last == -1 {
                        lines.len()
                    } else {
                        usize::try_from(last).unwrap_or(0).min(lines.len())
                    };
                    (start, lines.get(start..end.max(start)).unwrap_or(&[]))
                }
                None => (0, &lines[..]),
            };
            let numbered: Vec<String> = shown
                .iter()
                .enumerate()
                .map(|(i, l)| format!("{:>WIDTH$}\t{l}", i + start + 1))
                .collect();
            return Ok(format!(
                "Here's the content of {} with line numbers:\n{}",
                p.shown(),
                numbered.join("\n")
            ));
        }
        let files = self.files_under(p).await?;
        if files.is_empty() && !p.is_root() {
            return Err(Self::missing(p));
        }
        // Up to two levels below the directory, hidden items excluded,
        // each with its size (a directory's: the sum of its files').
        let base = p.dir_prefix();
        let mut rows: BTreeMap<String, u64> = BTreeMap::new();
        for (name, size) in &files {
            let rel = &name[base.len()..];
            let parts: Vec<&str> = rel.split('/').collect();
            if parts.iter().any(|s| s.starts_with('.')) {
                continue;
            }
            for depth in 1..=parts.len().min(2) {
                let mut key = parts[..depth].join("/");
                if depth < parts.len() {
                    key.push('/');
                }
                *rows.entry(key).or_default() += size;
            }
        }
        let total: u64 = files.values().sum();
        let mut out = format!(
            "Here're the files and directories up to 2 levels deep in {}, excluding hidden items:\n{}\t{}",
            p.shown(),
            human(total),
            p.shown()
        );
        for (rel, size) in rows {
            let _ = write!(out, "\n{}\t{}/{rel}", human(size), p.shown());
        }
        Ok(out)
    }

    async fn create(&self, p: &MemoryPath, text: &str) -> Result<String> {
        if p.is_root() || self.read(p).await?.is_some() || !self.names_under(p).await?.is_empty() {
            return Err(refuse(format!("File {} already exists", p.shown())));
        }
        self.write(p, text).await?;
        Ok(format!("File created successfully at: {}", p.shown()))
    }

    async fn str_replace(&self, p: &MemoryPath, old: &str, new: &str) -> Result<String> {
        let Some(text) = self.read(p).await? else {
            return Err(Self::missing(p));
        };
        let found: Vec<usize> = text.match_indices(old).map(|(i, _)| i).collect();
        match found.as_slice() {
            [] => Err(refuse(format!(
                "No replacement was performed, old_str `{old}` did not appear verbatim in {}.",
                p.shown()
            ))),
            [at] => {
                let changed = text[..*at].matches('\n').count();
                let next = text.replacen(old, new, 1);
                self.write(p, &next).await?;
                let lines: Vec<&str> = next.split('\n').collect();
                let from = changed.saturating_sub(2);
                let to = (changed + 3).min(lines.len());
                let snippet: Vec<String> = (from..to)
                    .map(|i| format!("{:>WIDTH$}\t{}", i + 1, lines[i]))
                    .collect();
                Ok(format!(
                    "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{}",
                    snippet.join("\n")
                ))
            }
            many => {
                let lines: Vec<String> = many
                    .iter()
                    .map(|&i| (text[..i].matches('\n').count() + 1).to_string())
                    .collect();
                Err(refuse(format!(
                    "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}. Please ensure it is unique",
                    lines.join(", ")
                )))
            }
        }
    }

    async fn insert(&self, p: &MemoryPath, at: i64, insert: &str) -> Result<String> {
        let Some(text) = self.read(p).await? else {
            return Err(Self::missing(p));
        };
        let mut lines: Vec<&str> = text.split('\n').collect();
        if lines.last() == Some(&"") {
            lines.pop();
        }
        let Some(i) = usize::try_from(at).ok().filter(|&i| i <= lines.len()) else {
            return Err(refuse(format!(
                "Invalid `insert_line` parameter: {at}. It should be within the range [0, {}].",
                lines.len()
            )));
        };
        let added = insert.trim_end_matches('\n');
        lines.insert(i, added);
        let mut next = lines.join("\n");
        if !next.ends_with('\n') {
            next.push('\n');
        }
        self.write(p, &next).await?;
        Ok(format!("The file {} has been edited.", p.shown()))
    }

    async fn erase(&self, name: &str) -> Result<()> {
        self.files.erase(&ArtifactName::new(name)?).await
    }

    async fn delete(&self, p: &MemoryPath) -> Result<String> {
        if p.is_root() {
            return Err(refuse("Cannot delete the /memories directory itself"));
        }
        if self.read(p).await?.is_some() {
            self.erase(&p.name_text()).await?;
        } else {
            let names = self.names_under(p).await?;
            if names.is_empty() {
                return Err(refuse(format!("The path {} does not exist", p.shown())));
            }
            for name in &names {
                self.erase(name).await?;
            }
        }
        Ok(format!("Successfully deleted {}", p.shown()))
    }

    async fn rename(&self, old: &MemoryPath, new: &MemoryPath) -> Result<String> {
        if old.is_root() {
            return Err(refuse("Cannot rename the /memories directory itself"));
        }
        if new.is_root()
            || self.read(new).await?.is_some()
            || !self.names_under(new).await?.is_empty()
        {
            return Err(refuse(format!(
                "The destination {} already exists",
                new.shown()
            )));
        }
        if new.segments.starts_with(&old.segments) {
            return Err(refuse(format!("Cannot move {} into itself", old.shown())));
        }
        let moves: Vec<(MemoryPath, MemoryPath)> = if self.read(old).await?.is_some() {
            vec![(old.clone(), new.clone())]
        } else {
            let names = self.names_under(old).await?;
            if names.is_empty() {
                return Err(refuse(format!("The path {} does not exist", old.shown())));
            }
            let base = old.dir_prefix();
            names
                .iter()
                .map(|name| {
                    let rel = &name[base.len()..];
                    let from = MemoryPath::parse(&MemoryPath::of_name(name).unwrap_or_default())?;
                    let to = MemoryPath::parse(&format!("{}/{rel}", new.shown()))?;
                    Ok((from, to))
                })
                .collect::<Result<_>>()?
        };
        // Every text is written under its new name before any old name is
        // erased: a failure midway leaves copies, never a lost file.
        for (from, to) in &moves {
            let text = self.read(from).await?.unwrap_or_default();
            self.write(to, &text).await?;
        }
        for (from, _) in &moves {
            self.erase(&from.name_text()).await?;
        }
        Ok(format!(
            "Successfully renamed {} to {}",
            old.shown(),
            new.shown()
        ))
    }
}

/// A size as the reference prints it (`0B`, `512B`, `4K`, `1.5K`):
/// whole units without a decimal, else one decimal.
fn human(bytes: u64) -> String {
    if bytes == 0 {
        return "0B".into();
    }
    let units = ["B", "K", "M", "G"];
    let i = (bytes.ilog2() / 10).min(3);
    let unit = 1u64 << (10 * i);
    let name = units[usize::try_from(i).unwrap_or(0)];
    if bytes.is_multiple_of(unit) {
        format!("{}{name}", bytes / unit)
    } else {
        // Tenths, rounded half up (the reference prints `%.1f`).
        let tenths = (bytes * 10 + unit / 2) / unit;
        format!("{}.{}{name}", tenths / 10, tenths % 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_paths_are_refused() {
        for bad in [
            "/memories_other/x",
            "/memoriesx",
            "memories/x",
            "/etc/passwd",
            "/memories/../etc/passwd",
            "/memories/a/../../b",
            "/memories/./a",
            "/memories//a",
            "/memories/a\\b",
            "/memories/%2e%2e/x",
            "/memories/a%2Fb",
            "/memories/a\u{0}b",
            "/memories/a\nb",
            "/memories/ a",
            "",
            "/",
        ] {
            assert!(MemoryPath::parse(bad).is_err(), "{bad:?}");
        }
        for good in [
            "/memories",
            "/memories/",
            "/memories/a.md",
            "/memories/dir/",
            "/memories/d/e f.txt",
            "/memories/100%.md",
        ] {
            assert!(MemoryPath::parse(good).is_ok(), "{good:?}");
        }
        let p = MemoryPath::parse("/memories/notes/a.md").unwrap();
        assert_eq!(p.name_text(), ".memories/notes/a.md");
        assert_eq!(
            MemoryPath::of_name(".memories/notes/a.md").as_deref(),
            Some("/memories/notes/a.md")
        );
        assert!(MemoryPath::parse("/memories").unwrap().is_root());
        let long = format!("/memories/{}", "x".repeat(2_000));
        assert!(MemoryPath::parse(&long).is_err());
    }

    #[test]
    fn sizes_print_as_the_reference_does() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(512), "512B");
        assert_eq!(human(4096), "4K");
        assert_eq!(human(1536), "1.5K");
        assert_eq!(human(3 << 20), "3M");
    }
}
