//! Keyed items: JSON values addressed by `(namespace, key)` inside one
//! `(app, user)` scope, for frameworks that address memory that way
//! (LangGraph's `BaseStore`).
//!
//! An item is a memory entry, so everything memory does applies to it
//! through the handle it is given (the server gives the one governed
//! handle): the policy, consent, quotas,
//! redaction, revisions, erasure and export. The mapping:
//!
//! - its id is derived from the namespace and the key (an idempotency key
//!   `item:` + a SHA-256 of both), so a put finds the item without a scan;
//! - its metadata is the value's fields as they are, plus reserved keys
//!   (`hippocamp:item` holds the address, `hippocamp:namespace` the labels
//!   joined with U+001F after each, so a namespace prefix is a string
//!   range and `("a","b")` never matches `("a","bc")`); a value may not
//!   use a key starting with `hippocamp:`;
//! - its content is the indexed text: the string, number and boolean
//!   leaves of the fields the caller names (default: the whole value),
//!   one per line; with nothing to index (or `index: false`) the content
//!   is the key and the item is marked `hippocamp:unindexed`, which a
//!   query never finds.
//!
//! A put on an existing key writes a new revision (`update_entry`, history
//! kept); a `ttl_ms` on a put (the one that creates the item or a
//! revision) may only shorten the item's lifetime: the earlier expiry is
//! taken, so neither a put nor the policy's lifetime is ever lengthened. Deleting an item erases it and every revision, as
//! deleting any entry does.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::entry::{EntryUpdate, MemoryEntry, NewEntry};
use crate::list::{ListOrder, ListRequest};
use crate::store::{MemoryStore, SearchRequest, WriteOptions};
use hippocamp_core::{
    CallOptions, EntryId, Error, Field, IdempotencyKey, MemoryScope, Metadata, Problem, Result,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};

/// The metadata key holding an item's address.
pub const ITEM_KEY: &str = "hippocamp:item";
/// The metadata key holding an item's labels, each followed by U+001F.
pub const NAMESPACE_KEY: &str = "hippocamp:namespace";
/// The metadata key marking an item a query does not find.
pub const UNINDEXED_KEY: &str = "hippocamp:unindexed";
/// The prefix no value key may use.
pub const RESERVED_PREFIX: &str = "hippocamp:";
/// Labels of one namespace.
pub const MAX_LABELS: usize = 16;
/// Bytes of one label, and of a namespace's id (its labels encoded).
pub const MAX_NAMESPACE_BYTES: usize = 256;
/// Bytes of a key.
pub const MAX_KEY_BYTES: usize = 256;
/// Items a search without a query, or a namespace listing, reads.
pub const MAX_SCAN: usize = 10_000;
/// Items or namespaces one page returns.
pub const MAX_PAGE: u64 = 1_000;
/// Fields one put may name for its index.
pub const MAX_INDEX_FIELDS: usize = 32;

const SEP: char = '\u{1f}';

/// The capabilities rows of the keyed items' fixed bounds.
pub fn fixed_limits() -> Vec<hippocamp_core::LimitInfo> {
    use hippocamp_core::LimitInfo;
    vec![
        LimitInfo::fixed(
            "items.max_labels",
            MAX_LABELS as u64,
            1,
            "labels of one namespace",
        ),
        LimitInfo::fixed(
            "items.max_namespace_bytes",
            MAX_NAMESPACE_BYTES as u64,
            1,
            "bytes of one label, and of a namespace's encoded id",
        ),
        LimitInfo::fixed(
            "items.max_key_bytes",
            MAX_KEY_BYTES as u64,
            1,
            "bytes of an item's key",
        ),
        LimitInfo::fixed(
            "items.max_scan",
            MAX_SCAN as u64,
            1,
            "items a search without a query or a namespace listing reads (more is an error: narrow the namespace or the filter)",
        ),
        LimitInfo::fixed(
            "items.max_page",
            MAX_PAGE,
            1,
            "items or namespaces of one page",
        ),
        LimitInfo::fixed(
            "items.max_index_fields",
            MAX_INDEX_FIELDS as u64,
            1,
            "fields one put names for its index",
        ),
    ]
}

/// A namespace: 1..=[`MAX_LABELS`] non-empty labels without control
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Namespace(Vec<String>);

impl Namespace {
    /// Checks `labels`.
    pub fn new(labels: Vec<String>) -> Result<Self> {
        Self::labels_ok(&labels, 1)?;
        let ns = Self(labels);
        if ns.id().len() > MAX_NAMESPACE_BYTES {
            return Err(Error::invalid(
                Field::Namespace,
                Problem::TooLong {
                    len: ns.id().len(),
                    max: MAX_NAMESPACE_BYTES,
                },
            ));
        }
        Ok(ns)
    }

    /// Checks labels of a prefix or suffix (`min` labels at least; `*`
    /// is a wildcard where the request allows it).
    fn labels_ok(labels: &[String], min: usize) -> Result<()> {
        if labels.len() < min {
            return Err(Error::invalid(Field::Namespace, Problem::Empty));
        }
        if labels.len() > MAX_LABELS {
            return Err(Error::invalid(
                Field::Namespace,
                Problem::TooMany {
                    count: labels.len(),
                    max: MAX_LABELS,
                },
            ));
        }
        for l in labels {
            hippocamp_core::ident::check_text(Field::Namespace, l, MAX_NAMESPACE_BYTES)?;
            if l.chars().any(char::is_control) {
                return Err(Error::invalid(
                    Field::Namespace,
                    Problem::Identifier("a label must not contain a control character"),
                ));
            }
        }
        Ok(())
    }

    /// The labels.
    pub fn labels(&self) -> &[String] {
        &self.0
    }

    /// The namespace as one id of the identifier grammar, losslessly:
    /// each label with `%`, `.`, `/`, `\` and a leading or trailing space
    /// percent-encoded, joined with `.`.
    pub fn id(&self) -> String {
        let mut out = String::new();
        for (i, l) in self.0.iter().enumerate() {
            if i > 0 {
                out.push('.');
            }
            let last = l.chars().count().saturating_sub(1);
            for (j, c) in l.chars().enumerate() {
                let edge_space = c == ' ' && (j == 0 || j == last);
                if matches!(c, '%' | '.' | '/' | '\\') || edge_space {
                    let _ = write!(out, "%{:02X}", u32::from(c));
                } else {
                    out.push(c);
                }
            }
        }
        out
    }

    /// Parses [`Namespace::id`]'s encoding.
    pub fn from_id(id: &str) -> Result<Self> {
        let bad = || {
            Error::invalid(
                Field::Namespace,
                Problem::Malformed(
                    "a namespace id is its labels joined with `.`, each with `%`, `.`, `/`, `\\` and edge spaces as %XX"
                        .into(),
                ),
            )
        };
        let mut labels = Vec::new();
        for part in id.split('.') {
            let mut label = String::new();
            let mut chars = part.chars();
            while let Some(c) = chars.next() {
                if c == '%' {
                    let hex: String = chars.by_ref().take(2).collect();
                    let code = u8::from_str_radix(&hex, 16).map_err(|_| bad())?;
                    if !matches!(code, b'%' | b'.' | b'/' | b'\\' | b' ') {
                        return Err(bad());
                    }
                    label.push(char::from(code));
                } else {
                    label.push(c);
                }
            }
            labels.push(label);
        }
        let ns = Self::new(labels)?;
        // One spelling per namespace, so one id per item.
        if ns.id() != id {
            return Err(bad());
        }
        Ok(ns)
    }

    /// The labels each followed by U+001F: what `hippocamp:namespace`
    /// holds, so a prefix is a string range.
    fn joined(labels: &[String]) -> String {
        labels.iter().fold(String::new(), |mut s, l| {
            s.push_str(l);
            s.push(SEP);
            s
        })
    }
}

/// A key: 1..=[`MAX_KEY_BYTES`] bytes, no NUL.
fn check_key(key: &str) -> Result<()> {
    hippocamp_core::ident::check_text(Field::ItemKey, key, MAX_KEY_BYTES)
}

/// The id of the entry holding `(ns, key)` in `scope`.
pub fn entry_id(scope: &MemoryScope, ns: &Namespace, key: &str) -> Result<EntryId> {
    Ok(EntryId::derive(scope, &idempotency_key(ns, key)?))
}

fn idempotency_key(ns: &Namespace, key: &str) -> Result<IdempotencyKey> {
    let mut h = Sha256::new();
    h.update(ns.id().as_bytes());
    h.update([0]);
    h.update(key.as_bytes());
    IdempotencyKey::new(format!("item:{}", hex::encode(h.finalize())))
}

/// What a put indexes: `true` (or absent) the whole value, `false`
/// nothing, or the named fields (`a.b`, `a[0]`, `a[*].b`; `$` is the
/// whole value).
#[derive(Debug, Clone, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum Index {
    /// The whole value, or nothing.
    All(bool),
    /// These fields.
    Fields(Vec<String>),
}

/// `PUT …/memory/items/{namespace}/{key}`'s body.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PutItem {
    /// The value: a JSON object, kept as it is (its fields count against
    /// the metadata bounds; secret-bearing keys are redacted like any
    /// metadata's).
    pub value: Map<String, Value>,
    /// What search indexes (default: the whole value).
    #[serde(default)]
    pub index: Option<Index>,
    /// Lifetime in ms when the put creates the item: it may only shorten
    /// the policy's.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
}

/// An item as the routes return it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Item {
    /// Its namespace's labels.
    pub namespace: Vec<String>,
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: Map<String, Value>,
    /// When it was first put (ms since the Unix epoch).
    pub created_at_ms: u64,
    /// When its current revision was put.
    pub updated_at_ms: u64,
    /// The memory entry holding it.
    pub id: EntryId,
    /// Its revision: 1, then one more per changing put.
    pub revision: u32,
    /// The search score (searches with a query only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// What a put did.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PutOutcome {
    /// The item as stored.
    pub item: Item,
    /// Whether the put created it.
    pub created: bool,
    /// Whether it wrote a revision (false: the same value again).
    pub changed: bool,
}

/// `POST …/memory/items/search`'s body.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchItems {
    /// Only items whose namespace starts with these labels (default: all).
    #[serde(default)]
    pub namespace_prefix: Vec<String>,
    /// A filter on the values' top-level fields (the metadata filter's
    /// grammar: literals, `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`,
    /// `$in`, `$nin`, `$exists`, `$and`, `$or`, `$not`).
    #[serde(default)]
    pub filter: Option<Map<String, Value>>,
    /// Ranks by memory search when given (unindexed items are never
    /// found); without it, items come in their namespaces' order of
    /// creation, then their own.
    #[serde(default)]
    pub query: Option<String>,
    /// Most items (1..=1,000; default 10; with a query, offset + limit is
    /// at most the store's `max_results`).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Items to skip first.
    #[serde(default)]
    pub offset: Option<u64>,
}

/// Items of a search.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ItemPage {
    /// The items, best or first first.
    pub items: Vec<Item>,
}

/// `POST …/memory/items/namespaces`'s body.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListNamespaces {
    /// Only namespaces starting with these labels (`*` matches any one).
    #[serde(default)]
    pub prefix: Option<Vec<String>>,
    /// Only namespaces ending with these labels (`*` matches any one).
    #[serde(default)]
    pub suffix: Option<Vec<String>>,
    /// Cut namespaces to this many labels (distinct after the cut).
    #[serde(default)]
    pub max_depth: Option<u64>,
    /// Most namespaces (1..=1,000; default 100).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Namespaces to skip first.
    #[serde(default)]
    pub offset: Option<u64>,
}

/// Namespaces, in label order.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NamespacePage {
    /// Each a list of labels.
    pub namespaces: Vec<Vec<String>>,
}

/// The indexed text of `value` for `index`; `None` when nothing is indexed.
pub fn indexed_text(value: &Map<String, Value>, index: Option<&Index>) -> Result<Option<String>> {
    let whole = Value::Object(value.clone());
    let mut leaves = Vec::new();
    match index {
        None | Some(Index::All(true)) => collect(&whole, &mut leaves),
        Some(Index::All(false)) => {}
        Some(Index::Fields(fields)) => {
            if fields.len() > MAX_INDEX_FIELDS {
                return Err(Error::invalid(
                    Field::ItemValue,
                    Problem::TooMany {
                        count: fields.len(),
                        max: MAX_INDEX_FIELDS,
                    },
                ));
            }
            for f in fields {
                for v in select(&whole, f)? {
                    collect(v, &mut leaves);
                }
            }
        }
    }
    let text = leaves.join("\n");
    Ok((!text.trim().is_empty()).then_some(text))
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(b) => out.push(b.to_string()),
        Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect(x, out)),
        Value::Null => {}
    }
}

/// The values at a field path: `a.b`, `a[0]`, `a[-1]`, `a[*].b`, `$`.
fn select<'a>(root: &'a Value, path: &str) -> Result<Vec<&'a Value>> {
    let bad = || {
        Error::invalid(
            Field::ItemValue,
            Problem::Malformed(format!(
                "index field `{path}` is not a path like a.b, a[0] or a[*].b"
            )),
        )
    };
    if path == "$" {
        return Ok(vec![root]);
    }
    let mut here = vec![root];
    for seg in path.split('.') {
        let (name, rest) = seg.find('[').map_or((seg, ""), |i| (&seg[..i], &seg[i..]));
        if name.is_empty() && rest.is_empty() {
            return Err(bad());
        }
        if !name.is_empty() {
            here = here.into_iter().filter_map(|v| v.get(name)).collect();
        }
        let mut rest = rest;
        while let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(bad)?;
            let idx = &r[..end];
            rest = &r[end + 1..];
            here = here
                .into_iter()
                .filter_map(Value::as_array)
                .flat_map(|a| -> Vec<&Value> {
                    match idx {
                        "*" => a.iter().collect(),
                        _ => idx
                            .parse::<i64>()
                            .ok()
                            .and_then(|i| {
                                let n = i64::try_from(a.len()).ok()?;
                                let at = if i < 0 { n + i } else { i };
                                usize::try_from(at).ok().and_then(|at| a.get(at))
                            })
                            .into_iter()
                            .collect(),
                    }
                })
                .collect();
        }
        if !rest.is_empty() {
            return Err(bad());
        }
    }
    Ok(here)
}

/// The entry's metadata and content for `(ns, key, put)`.
fn entry_parts(ns: &Namespace, key: &str, put: &PutItem) -> Result<(Metadata, String)> {
    if let Some(k) = put.value.keys().find(|k| k.starts_with(RESERVED_PREFIX)) {
        return Err(Error::invalid(
            Field::ItemValue,
            Problem::Malformed(format!(
                "`{k}`: keys starting with `hippocamp:` are reserved"
            )),
        ));
    }
    let text = indexed_text(&put.value, put.index.as_ref())?;
    let mut m = put.value.clone();
    m.insert(
        ITEM_KEY.into(),
        json!({"namespace": ns.labels(), "key": key}),
    );
    m.insert(
        NAMESPACE_KEY.into(),
        Value::String(Namespace::joined(ns.labels())),
    );
    let content = if let Some(t) = text {
        t
    } else {
        m.insert(UNINDEXED_KEY.into(), Value::Bool(true));
        key.to_owned()
    };
    Ok((m, content))
}

/// The item an entry holds, if it holds one.
pub fn item_of(entry: &MemoryEntry, score: Option<f64>) -> Option<Item> {
    let meta = &entry.metadata;
    let addr = meta.get(ITEM_KEY)?;
    let namespace: Vec<String> = serde_json::from_value(addr.get("namespace")?.clone()).ok()?;
    let key = addr.get("key")?.as_str()?.to_owned();
    let value: Map<String, Value> = meta
        .iter()
        .filter(|(k, _)| !k.starts_with(RESERVED_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(Item {
        namespace,
        key,
        value,
        created_at_ms: entry.timestamp_ms,
        updated_at_ms: entry.revised_at_ms.unwrap_or(entry.timestamp_ms),
        id: entry.id,
        revision: entry.revision.max(1),
        score,
    })
}

/// Puts `value` at `(ns, key)`: creates the item, or writes a revision.
pub async fn put(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    ns: &Namespace,
    key: &str,
    put: &PutItem,
    call: &CallOptions,
) -> Result<PutOutcome> {
    check_key(key)?;
    let (metadata, content) = entry_parts(ns, key, put)?;
    let id = entry_id(scope, ns, key)?;
    let existing = match store.get_entry(scope, &id, call).await {
        Ok(_) => true,
        Err(Error::NotFound(_)) => false,
        Err(e) => return Err(e),
    };
    // A put's lifetime, on the put that creates the item and on a
    // revision alike: the store takes the earlier expiry.
    let mut opts = WriteOptions::new(*call);
    if let Some(ttl) = put.ttl_ms {
        opts.obligations.expires_at_ms = Some(hippocamp_core::time::now_ms().saturating_add(ttl));
    }
    if !existing {
        let entry = NewEntry::new(content.clone())
            .metadata(metadata.clone())
            .idempotency_key(idempotency_key(ns, key)?);
        match store.add_entry(scope, entry, &opts).await {
            Ok(added) if !added.duplicate => {
                let item = item_of(&added.entry, None).ok_or_else(not_an_item)?;
                return Ok(PutOutcome {
                    item,
                    created: true,
                    changed: true,
                });
            }
            // Another put made it first: ours is a revision.
            Ok(_) | Err(Error::IdempotencyConflict { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let update = EntryUpdate { content, metadata };
    let out = store.update_entry(scope, &id, &update, &opts).await?;
    Ok(PutOutcome {
        item: item_of(&out.entry, None).ok_or_else(not_an_item)?,
        created: false,
        changed: out.changed,
    })
}

fn not_an_item() -> Error {
    Error::NotFound("item")
}

/// The item at `(ns, key)`, or `NotFound`.
pub async fn get(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    ns: &Namespace,
    key: &str,
    call: &CallOptions,
) -> Result<Item> {
    check_key(key)?;
    let entry = store
        .get_entry(scope, &entry_id(scope, ns, key)?, call)
        .await
        .map_err(|e| match e {
            Error::NotFound(_) => not_an_item(),
            e => e,
        })?;
    item_of(&entry, None)
        .filter(|i| i.namespace == ns.labels() && i.key == key)
        .ok_or_else(not_an_item)
}

/// Erases the item at `(ns, key)` and its revisions; how many entries
/// were erased (0: there was none).
pub async fn delete(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    ns: &Namespace,
    key: &str,
    call: &CallOptions,
) -> Result<u64> {
    check_key(key)?;
    match store
        .delete_entry(scope, &entry_id(scope, ns, key)?, call)
        .await
    {
        Err(Error::NotFound(_)) => Ok(0),
        other => other,
    }
}

/// The filter selecting items under `prefix` (and `extra`).
fn items_filter(prefix: &[String], extra: Option<&Map<String, Value>>) -> Result<Value> {
    let mut all = Vec::new();
    if let Some(f) = extra {
        if let Some(k) = f.keys().find(|k| k.starts_with(RESERVED_PREFIX)) {
            return Err(Error::invalid(
                Field::Filter,
                Problem::Malformed(format!(
                    "`{k}`: keys starting with `hippocamp:` are reserved"
                )),
            ));
        }
        all.push(Value::Object(f.clone()));
    }
    if prefix.is_empty() {
        all.push(json!({ITEM_KEY: {"$exists": true}}));
    } else {
        Namespace::labels_ok(prefix, 1)?;
        let from = Namespace::joined(prefix);
        // The first string after every one that starts with `from`:
        // `from` ends with U+001F, so U+0020 there bounds them all.
        let mut to = from.clone();
        to.pop();
        to.push(' ');
        all.push(json!({NAMESPACE_KEY: {"$gte": from, "$lt": to}}));
    }
    Ok(json!({ "$and": all }))
}

fn page_bounds(limit: Option<u64>, offset: Option<u64>, default: u64) -> Result<(usize, usize)> {
    let limit = hippocamp_core::limits::page_limit(limit, default, MAX_PAGE)?;
    let offset = usize::try_from(offset.unwrap_or(0)).unwrap_or(usize::MAX);
    Ok((limit, offset))
}

/// Every item under `filter`, oldest first (at most [`MAX_SCAN`]).
async fn scan(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    filter: Value,
    call: &CallOptions,
) -> Result<Vec<Item>> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let req = ListRequest {
            limit: None,
            cursor,
            order: Some(ListOrder::Oldest),
            filter: Some(filter.clone()),
        };
        let page = store.list_entries(scope, &req, call).await?;
        out.extend(page.entries.iter().filter_map(|e| item_of(e, None)));
        if out.len() > MAX_SCAN {
            return Err(Error::invalid(
                Field::Limit,
                Problem::TooMany {
                    count: out.len(),
                    max: MAX_SCAN,
                },
            ));
        }
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(out),
        }
    }
}

/// Items under a namespace prefix, by query or in creation order.
pub async fn search(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    req: &SearchItems,
    call: &CallOptions,
) -> Result<ItemPage> {
    let (limit, offset) = page_bounds(req.limit, req.offset, 10)?;
    let mut filter = items_filter(&req.namespace_prefix, req.filter.as_ref())?;
    if let Some(q) = &req.query {
        if let Some(all) = filter.get_mut("$and").and_then(Value::as_array_mut) {
            all.push(json!({UNINDEXED_KEY: {"$exists": false}}));
        }
        let want = u64::try_from(offset.saturating_add(limit)).unwrap_or(u64::MAX);
        let rq = SearchRequest::new(q.clone()).limit(want).filter(filter);
        let hits = store.search(scope, &rq, call).await?.hits;
        let items = hits
            .iter()
            .filter_map(|h| item_of(&h.entry, Some(h.score)))
            .skip(offset)
            .take(limit)
            .collect();
        return Ok(ItemPage { items });
    }
    // Namespaces in the order their first live item was made, items in
    // theirs: the order of LangGraph's in-memory store. The namespaces'
    // order comes from all their items, not only those the filter keeps.
    let all = if req.filter.is_some() {
        scan(
            store,
            scope,
            items_filter(&req.namespace_prefix, None)?,
            call,
        )
        .await?
    } else {
        Vec::new()
    };
    let items = scan(store, scope, filter, call).await?;
    let everything = if req.filter.is_some() { &all } else { &items };
    let mut first: BTreeMap<Vec<String>, (u64, usize)> = BTreeMap::new();
    for (i, it) in everything.iter().enumerate() {
        first
            .entry(it.namespace.clone())
            .or_insert((it.created_at_ms, i));
    }
    let mut ordered: Vec<(usize, Item)> = items.into_iter().enumerate().collect();
    ordered.sort_by_key(|(i, it)| (first.get(&it.namespace).copied(), *i));
    Ok(ItemPage {
        items: ordered
            .into_iter()
            .map(|(_, it)| it)
            .skip(offset)
            .take(limit)
            .collect(),
    })
}

fn matches(ns: &[String], pattern: &[String], from_end: bool) -> bool {
    if ns.len() < pattern.len() {
        return false;
    }
    let pairs: Box<dyn Iterator<Item = (&String, &String)>> = if from_end {
        Box::new(ns.iter().rev().zip(pattern.iter().rev()))
    } else {
        Box::new(ns.iter().zip(pattern.iter()))
    };
    pairs.into_iter().all(|(n, p)| p == "*" || n == p)
}

/// The namespaces holding items, in label order.
pub async fn namespaces(
    store: &dyn MemoryStore,
    scope: &MemoryScope,
    req: &ListNamespaces,
    call: &CallOptions,
) -> Result<NamespacePage> {
    let (limit, offset) = page_bounds(req.limit, req.offset, 100)?;
    for p in [&req.prefix, &req.suffix].into_iter().flatten() {
        Namespace::labels_ok(p, 0)?;
    }
    // A prefix without wildcards narrows the scan in the store.
    let fixed: Vec<String> = req
        .prefix
        .iter()
        .flatten()
        .take_while(|l| *l != "*")
        .cloned()
        .collect();
    let items = scan(store, scope, items_filter(&fixed, None)?, call).await?;
    let depth = req
        .max_depth
        .map(|d| usize::try_from(d).unwrap_or(usize::MAX));
    let mut out: Vec<Vec<String>> = items
        .into_iter()
        .map(|i| i.namespace)
        .filter(|ns| req.prefix.as_ref().is_none_or(|p| matches(ns, p, false)))
        .filter(|ns| req.suffix.as_ref().is_none_or(|s| matches(ns, s, true)))
        .map(|mut ns| {
            if let Some(d) = depth {
                ns.truncate(d);
            }
            ns
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(NamespacePage {
        namespaces: out.into_iter().skip(offset).take(limit).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(labels: &[&str]) -> Namespace {
        Namespace::new(labels.iter().map(|s| (*s).to_owned()).collect()).unwrap()
    }

    #[test]
    fn namespace_ids_are_lossless_and_in_the_id_grammar() {
        for labels in [
            &["memories"][..],
            &["users", "u1", "prefs"],
            &["a.b", "c%d", "e/f\\g"],
            &[" edge ", "in side", "."],
            &["..", "café", "*"],
        ] {
            let n = ns(labels);
            let id = n.id();
            hippocamp_core::ident::check_new_id(Field::SessionId, &id).unwrap();
            assert_eq!(Namespace::from_id(&id).unwrap(), n, "{id}");
        }
        // Distinct namespaces, distinct ids.
        assert_ne!(ns(&["a", "b"]).id(), ns(&["a.b"]).id());
        // One spelling only.
        assert!(Namespace::from_id("a%2eb").is_err());
        assert!(Namespace::from_id("a%41").is_err());
        for bad in [&[][..], &[""], &["a\u{1f}b"]] {
            assert!(
                Namespace::new(bad.iter().map(|s| (*s).to_owned()).collect()).is_err(),
                "{bad:?}"
            );
        }
        assert!(Namespace::new(vec!["x".into(); MAX_LABELS + 1]).is_err());
        assert!(Namespace::new(vec!["x".repeat(200), "y".repeat(100)]).is_err());
    }

    #[test]
    fn indexed_text_takes_the_named_fields() {
        let v: Map<String, Value> = serde_json::from_value(json!({
            "text": "likes tea", "tags": ["warm", "green"], "n": 3,
            "nested": {"a": [{"b": "deep"}, {"b": "deeper"}]}, "skip": null
        }))
        .unwrap();
        let whole = indexed_text(&v, None).unwrap().unwrap();
        for w in ["likes tea", "warm", "green", "3", "deep", "deeper"] {
            assert!(whole.contains(w), "{whole}");
        }
        let f = |fields: &[&str]| {
            indexed_text(
                &v,
                Some(&Index::Fields(
                    fields.iter().map(|s| (*s).to_owned()).collect(),
                )),
            )
            .unwrap()
        };
        assert_eq!(f(&["text"]).as_deref(), Some("likes tea"));
        assert_eq!(f(&["tags[1]"]).as_deref(), Some("green"));
        assert_eq!(f(&["tags[-1]"]).as_deref(), Some("green"));
        assert_eq!(f(&["nested.a[*].b"]).as_deref(), Some("deep\ndeeper"));
        assert_eq!(f(&["missing"]), None);
        assert_eq!(indexed_text(&v, Some(&Index::All(false))).unwrap(), None);
        assert!(indexed_text(&v, Some(&Index::Fields(vec!["a[".into()]))).is_err());
    }

    #[test]
    fn a_prefix_range_never_takes_a_sibling() {
        let f = items_filter(&["a".into(), "b".into()], None).unwrap();
        let limits = hippocamp_core::JsonLimits {
            max_bytes: 16_384,
            max_depth: 8,
            max_nodes: 512,
        };
        let parsed = hippocamp_core::Filter::parse(&f, limits).unwrap();
        let meta = |labels: &[&str]| {
            let mut m = Map::new();
            m.insert(ITEM_KEY.into(), json!({}));
            m.insert(
                NAMESPACE_KEY.into(),
                Value::String(Namespace::joined(
                    &labels.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
                )),
            );
            m
        };
        assert!(parsed.matches(&meta(&["a", "b"])));
        assert!(parsed.matches(&meta(&["a", "b", "c"])));
        assert!(!parsed.matches(&meta(&["a", "bc"])));
        assert!(!parsed.matches(&meta(&["a"])));
        assert!(!parsed.matches(&meta(&["b", "a", "b"])));
    }
}
