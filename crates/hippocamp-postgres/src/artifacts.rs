//! [`PgArtifacts`]: artifacts with their contents on an object store (S3)
//! and their catalog in PostgreSQL.
//!
//! A put uploads the content under a fresh random key first, then one
//! transaction publishes it: it locks the scope's row (per-scope quota),
//! the totals row (store-wide quota), advances the name's high-water
//! version and inserts the version's row. The number comes from that
//! transaction, so two servers never allocate one version twice, whatever
//! the object store does with conditional writes; the row names the
//! content, so no version ever points at content that is not there. A put
//! that fails before its commit removes its content; one whose commit
//! answer was lost may leave content nothing references, which
//! [`repair`](PgArtifacts::repair) removes. Deletion removes the rows (and
//! frees quota, never numbers: the name's high-water stays) in one
//! transaction, then the content. Listings are keyset pages of the
//! catalog: O(page) however many versions or names a scope holds.
//!
//! Every read is verified against the SHA-256 chunk digests the catalog
//! keeps. Bodies are held whole in memory while they go up or come down
//! (bounded by `max_artifact_bytes`); capabilities say `streaming: false`.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use hippocamp_artifacts::integrity::{BytesSource, Integrity, verified_stream};
use hippocamp_artifacts::mem::collect_body;
use hippocamp_artifacts::model::{ScopePage, scope_cursor};
use hippocamp_artifacts::store::{check_put, check_version};
use hippocamp_artifacts::{
    ArtifactCapabilities, ArtifactLimits, ArtifactMeta, ArtifactName, ArtifactRead, ArtifactScope,
    ArtifactStatus, ArtifactStore, Body, ByteRange, DeleteSelector, Page, PageRequest, PutOptions,
    Selector,
};
use hippocamp_core::{CallOptions, Deadline, Error, QuotaLimit, Result, Stage};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt as _, PutPayload};

use crate::db::{Database, db_error};

/// Artifacts on an object store, catalogued in PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgArtifacts {
    db: Database,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    limits: ArtifactLimits,
}

/// What [`PgArtifacts::repair`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Repaired {
    /// Content objects looked at.
    pub examined: u64,
    /// Content objects no version referenced, removed.
    pub removed: u64,
}

/// Content objects one page of [`PgArtifacts::repair`] looks at.
const REPAIR_PAGE: usize = 1_000;

fn i(x: u64) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

fn u(x: i64) -> u64 {
    u64::try_from(x).unwrap_or(0)
}

fn store_err(e: object_store::Error) -> Error {
    Error::Unavailable(format!("object store: {e}"))
}

fn scope_key(scope: &ArtifactScope) -> String {
    scope.to_string()
}

fn corrupt(what: &str) -> impl Fn(serde_json::Error) -> Error + '_ {
    move |e| Error::Corrupt(format!("an artifact {what} record does not decode: {e}"))
}

impl PgArtifacts {
    /// Artifacts over `db`, their contents under `prefix` of `store`.
    pub fn new(
        db: Database,
        store: Arc<dyn ObjectStore>,
        prefix: impl Into<String>,
        limits: ArtifactLimits,
    ) -> Result<Self> {
        limits.validate()?;
        Ok(Self {
            db,
            store,
            prefix: prefix.into().trim_end_matches('/').to_owned(),
            limits,
        })
    }

    fn deadline(&self, opts: &CallOptions) -> Deadline {
        opts.deadline(self.limits.call_timeout())
    }

    fn content_prefix(&self) -> Path {
        Path::from(format!("{}/content", self.prefix))
    }

    /// The content key of a live version (tests use it to damage content).
    #[doc(hidden)]
    pub async fn content_key(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        version: u64,
    ) -> Option<Path> {
        let client = self
            .db
            .client(Deadline::after(self.limits.call_timeout()))
            .await
            .ok()?;
        let row = client
            .query_opt(
                "SELECT v.content FROM artifact_versions v JOIN artifact_scopes s ON s.id = v.scope_id \
                 WHERE s.key = $1 AND v.name = $2 AND v.version = $3",
                &[&scope_key(scope), &name.as_str(), &i(version)],
            )
            .await
            .ok()??;
        Some(Path::from(row.get::<_, String>(0)))
    }

    /// The object store holding the contents.
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.store)
    }

    /// Removes content objects that no version references and that are
    /// older than `grace` (a put in flight uploads before it publishes),
    /// walking every content object page by page.
    pub async fn repair(&self, grace: std::time::Duration) -> Result<Repaired> {
        let mut report = Repaired::default();
        let mut after = None;
        loop {
            let (page, next) = self
                .repair_page(grace, after.as_deref(), REPAIR_PAGE)
                .await?;
            report.examined += page.examined;
            report.removed += page.removed;
            match next {
                Some(n) => after = Some(n),
                None => return Ok(report),
            }
        }
    }

    /// One bounded page of the repair pass: at most `max` content objects
    /// after `after` in key order, those older than `grace` that no
    /// version references removed (one catalog query for the page).
    /// Returns what it did and the key the next page starts after (`None`
    /// once the listing ended): the background sweeper walks the store a
    /// page a pass.
    pub async fn repair_page(
        &self,
        grace: std::time::Duration,
        after: Option<&str>,
        max: usize,
    ) -> Result<(Repaired, Option<String>)> {
        use futures::{StreamExt as _, TryStreamExt as _};
        let prefix = self.content_prefix();
        let after = after.map(Path::from);
        let listing = match &after {
            Some(a) => self.store.list_with_offset(Some(&prefix), a),
            None => self.store.list(Some(&prefix)),
        };
        // Filtered here too: a server that ignores the offset still makes
        // progress.
        let objects: Vec<object_store::ObjectMeta> = listing
            .try_filter(|o| futures::future::ready(after.as_ref().is_none_or(|a| o.location > *a)))
            .take(max.max(1))
            .try_collect()
            .await
            .map_err(store_err)?;
        let next = (objects.len() >= max.max(1))
            .then(|| objects.last().map(|o| o.location.to_string()))
            .flatten();
        let cutoff = chrono_cutoff(grace);
        let old: Vec<String> = objects
            .iter()
            .filter(|o| o.last_modified.timestamp_millis() <= cutoff)
            .map(|o| o.location.to_string())
            .collect();
        let mut report = Repaired {
            examined: objects.len() as u64,
            removed: 0,
        };
        if old.is_empty() {
            return Ok((report, next));
        }
        let client = self
            .db
            .client(Deadline::after(self.limits.call_timeout()))
            .await?;
        let referenced: std::collections::HashSet<String> = client
            .query(
                "SELECT DISTINCT content FROM artifact_versions WHERE content = ANY($1)",
                &[&old],
            )
            .await
            .map_err(db_error)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for key in old.iter().filter(|k| !referenced.contains(*k)) {
            match self.store.delete(&Path::from(key.as_str())).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => report.removed += 1,
                Err(e) => return Err(store_err(e)),
            }
        }
        Ok((report, next))
    }

    async fn remove_quietly(&self, keys: &[String]) {
        for k in keys {
            let _ = self.store.delete(&Path::from(k.as_str())).await;
        }
    }

    /// The version `selector` names among `name`'s live versions.
    async fn find(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        deadline: Deadline,
    ) -> Result<(ArtifactMeta, Integrity, String)> {
        let version = match selector {
            Selector::Latest => None,
            Selector::Version(v) => {
                check_version(v)?;
                Some(i(v))
            }
        };
        let client = self.db.client(deadline).await?;
        let row = client
            .query_opt(
                "SELECT v.meta, v.integrity, v.content FROM artifact_versions v \
                 JOIN artifact_scopes s ON s.id = v.scope_id \
                 WHERE s.key = $1 AND v.name = $2 AND ($3::BIGINT IS NULL OR v.version = $3) \
                 ORDER BY v.version DESC LIMIT 1",
                &[&scope_key(scope), &name.as_str(), &version],
            )
            .await
            .map_err(db_error)?;
        let Some(row) = row else {
            // A name with versions but not this one is a missing version.
            return Err(match version {
                Some(_) if self.has_name(scope, name, deadline).await? => {
                    Error::NotFound("artifact version")
                }
                _ => Error::NotFound("artifact"),
            });
        };
        let meta: ArtifactMeta = serde_json::from_str(row.get(0)).map_err(corrupt("meta"))?;
        let integrity: Integrity =
            serde_json::from_str(row.get(1)).map_err(corrupt("integrity"))?;
        if meta.scope != *scope || meta.name != *name {
            return Err(Error::Corrupt(
                "a catalog row belongs to another artifact".into(),
            ));
        }
        Ok((meta, integrity, row.get(2)))
    }

    async fn has_name(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        deadline: Deadline,
    ) -> Result<bool> {
        let client = self.db.client(deadline).await?;
        Ok(client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM artifact_versions v JOIN artifact_scopes s ON s.id = v.scope_id \
                 WHERE s.key = $1 AND v.name = $2)",
                &[&scope_key(scope), &name.as_str()],
            )
            .await
            .map_err(db_error)?
            .get(0))
    }
}

/// Now minus `grace`, in ms since the Unix epoch.
fn chrono_cutoff(grace: std::time::Duration) -> i64 {
    let now = i(hippocamp_core::time::now_ms());
    now.saturating_sub(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX))
}

#[async_trait]
impl ArtifactStore for PgArtifacts {
    fn capabilities(&self) -> ArtifactCapabilities {
        ArtifactCapabilities {
            api_version: 1,
            backend: "postgres+object_store".to_owned(),
            durable: true,
            scopes: vec!["app".into(), "user".into(), "session".into()],
            immutable_versions: true,
            range_reads: true,
            // Bodies are held whole while they go up or come down.
            streaming: false,
            scope_listing: true,
            limits: self.limits.describe_all(),
            routing: None,
        }
    }

    async fn put(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        body: Body,
        opts: &PutOptions,
    ) -> Result<ArtifactMeta> {
        let deadline = self.deadline(&opts.call);
        check_put(opts)?;
        let (data, integrity) = collect_body(body, &self.limits, deadline).await?;
        let size = integrity.size;
        // The content goes up first: the catalog row that publishes it
        // comes after, so no version ever names missing content.
        let key = format!(
            "{}/{}",
            self.content_prefix(),
            hex::encode(rand::random::<[u8; 16]>())
        );
        tokio::time::timeout_at(
            deadline.instant().into(),
            self.store
                .put(&Path::from(key.as_str()), PutPayload::from_bytes(data)),
        )
        .await
        .map_err(|_| Error::Timeout(Stage::Transfer))?
        .map_err(store_err)?;
        let published = self
            .publish(scope, name, opts, &integrity, &key, deadline)
            .await;
        match published {
            Ok(meta) => Ok(meta),
            Err(Unpublished::Nothing(e)) => {
                self.remove_quietly(&[key]).await;
                Err(e)
            }
            // The commit's answer was lost: the content stays (a repair
            // pass removes it if the row did not land).
            Err(Unpublished::Unknown(e)) => Err(e),
        }
        .inspect(|m| debug_assert_eq!(m.size, size))
    }

    async fn get(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        range: Option<ByteRange>,
        opts: &CallOptions,
    ) -> Result<ArtifactRead> {
        let deadline = self.deadline(opts);
        let (meta, integrity, content) = self.find(scope, name, selector, deadline).await?;
        if let Some(r) = range {
            r.check(meta.size)?;
        }
        let data: Bytes = match tokio::time::timeout_at(
            deadline.instant().into(),
            self.store.get(&Path::from(content.as_str())),
        )
        .await
        .map_err(|_| Error::Timeout(Stage::Transfer))?
        {
            Ok(r) => tokio::time::timeout_at(deadline.instant().into(), r.bytes())
                .await
                .map_err(|_| Error::Timeout(Stage::Transfer))?
                .map_err(store_err)?,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(Error::Corrupt("the content of a version is missing".into()));
            }
            Err(e) => return Err(store_err(e)),
        };
        let integrity = Arc::new(integrity);
        let body = verified_stream(BytesSource(data, integrity.chunk_size), integrity, range);
        Ok(ArtifactRead { meta, range, body })
    }

    async fn head(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: Selector,
        opts: &CallOptions,
    ) -> Result<ArtifactMeta> {
        let deadline = self.deadline(opts);
        Ok(self.find(scope, name, selector, deadline).await?.0)
    }

    async fn delete(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        selector: DeleteSelector,
        opts: &CallOptions,
    ) -> Result<Vec<u64>> {
        let deadline = self.deadline(opts);
        let version = match selector {
            DeleteSelector::Version(v) => {
                check_version(v)?;
                Some(i(v))
            }
            _ => None,
        };
        let mut client = self.db.client(deadline).await?;
        let tx = client.transaction().await.map_err(db_error)?;
        let Some(scope_row) = tx
            .query_opt(
                "SELECT id FROM artifact_scopes WHERE key = $1 FOR UPDATE",
                &[&scope_key(scope)],
            )
            .await
            .map_err(db_error)?
        else {
            return Ok(Vec::new());
        };
        let scope_id: i64 = scope_row.get(0);
        let chosen: Vec<i64> = match selector {
            DeleteSelector::All => tx
                .query(
                    "SELECT version FROM artifact_versions WHERE scope_id = $1 AND name = $2 ORDER BY version",
                    &[&scope_id, &name.as_str()],
                )
                .await
                .map_err(db_error)?
                .iter()
                .map(|r| r.get(0))
                .collect(),
            DeleteSelector::Latest => tx
                .query(
                    "SELECT version FROM artifact_versions WHERE scope_id = $1 AND name = $2 \
                     ORDER BY version DESC LIMIT 1",
                    &[&scope_id, &name.as_str()],
                )
                .await
                .map_err(db_error)?
                .iter()
                .map(|r| r.get(0))
                .collect(),
            DeleteSelector::Version(_) => tx
                .query(
                    "SELECT version FROM artifact_versions WHERE scope_id = $1 AND name = $2 AND version = $3",
                    &[&scope_id, &name.as_str(), &version],
                )
                .await
                .map_err(db_error)?
                .iter()
                .map(|r| r.get(0))
                .collect(),
        };
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        let gone = tx
            .query(
                "DELETE FROM artifact_versions WHERE scope_id = $1 AND name = $2 AND version = ANY($3) \
                 RETURNING size, content",
                &[&scope_id, &name.as_str(), &chosen],
            )
            .await
            .map_err(db_error)?;
        let freed: i64 = gone.iter().map(|r| r.get::<_, i64>(0)).sum();
        let count = i64::try_from(gone.len()).unwrap_or(i64::MAX);
        let contents: Vec<String> = gone.iter().map(|r| r.get(1)).collect();
        tx.execute(
            "UPDATE artifact_scopes SET count = count - $2, bytes = bytes - $3 WHERE id = $1",
            &[&scope_id, &count, &freed],
        )
        .await
        .map_err(db_error)?;
        tx.execute(
            "UPDATE artifact_totals SET count = count - $1, bytes = bytes - $2",
            &[&count, &freed],
        )
        .await
        .map_err(db_error)?;
        deadline.check(Stage::Commit)?;
        tx.commit().await.map_err(db_error)?;
        // After the rows are gone: a failure here leaves content a repair
        // pass removes, never a version without content.
        self.remove_quietly(&contents).await;
        Ok(chosen.into_iter().map(u).collect())
    }

    async fn list_names(
        &self,
        scope: &ArtifactScope,
        page: &PageRequest<ArtifactName>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactName, ArtifactName>> {
        let deadline = self.deadline(opts);
        let limit = self.limits.page_limit(page.limit)?;
        let client = self.db.client(deadline).await?;
        let rows = client
            .query(
                "SELECT DISTINCT v.name FROM artifact_versions v JOIN artifact_scopes s ON s.id = v.scope_id \
                 WHERE s.key = $1 AND ($2::TEXT IS NULL OR v.name > $2) ORDER BY v.name LIMIT $3",
                &[
                    &scope_key(scope),
                    &page.cursor.as_ref().map(ArtifactName::as_str),
                    &i(limit as u64 + 1),
                ],
            )
            .await
            .map_err(db_error)?;
        let items = rows
            .iter()
            .map(|r| {
                ArtifactName::new(r.get::<_, String>(0))
                    .map_err(|_| Error::Corrupt("a catalog name is not valid".into()))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::of_one_more(scope, items, limit, Clone::clone))
    }

    async fn list_versions(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        page: &PageRequest<u64>,
        opts: &CallOptions,
    ) -> Result<Page<ArtifactMeta, u64>> {
        let deadline = self.deadline(opts);
        let limit = self.limits.page_limit(page.limit)?;
        let client = self.db.client(deadline).await?;
        let rows = client
            .query(
                "SELECT v.meta FROM artifact_versions v JOIN artifact_scopes s ON s.id = v.scope_id \
                 WHERE s.key = $1 AND v.name = $2 AND ($3::BIGINT IS NULL OR v.version > $3) \
                 ORDER BY v.version LIMIT $4",
                &[
                    &scope_key(scope),
                    &name.as_str(),
                    &page.cursor.map(i),
                    &i(limit as u64 + 1),
                ],
            )
            .await
            .map_err(db_error)?;
        let items = rows
            .iter()
            .map(|r| serde_json::from_str::<ArtifactMeta>(r.get(0)).map_err(corrupt("meta")))
            .collect::<Result<Vec<_>>>()?;
        if items.iter().any(|m| m.scope != *scope || m.name != *name) {
            return Err(Error::Corrupt(
                "a catalog row belongs to another artifact".into(),
            ));
        }
        Ok(Page::of_one_more(scope, items, limit, |m| m.version))
    }

    async fn list_scopes(
        &self,
        cursor: Option<&str>,
        limit: Option<u64>,
        opts: &CallOptions,
    ) -> Result<ScopePage> {
        let deadline = self.deadline(opts);
        let limit = self.limits.page_limit(limit)?;
        let after = cursor.map(scope_cursor).transpose()?;
        let client = self.db.client(deadline).await?;
        let rows = client
            .query(
                "SELECT hash, scope FROM artifact_scopes WHERE count > 0 AND ($1::BYTEA IS NULL OR hash > $1) \
                 ORDER BY hash LIMIT $2",
                &[&after, &i(limit as u64 + 1)],
            )
            .await
            .map_err(db_error)?;
        let mut scopes = Vec::with_capacity(rows.len());
        for r in &rows {
            let s: ArtifactScope = serde_json::from_str(r.get(1)).map_err(corrupt("scope"))?;
            let hash: Vec<u8> = r.get(0);
            if hash != s.hash() {
                return Err(Error::Corrupt(
                    "a catalog scope does not match its hash".into(),
                ));
            }
            scopes.push((hash, s));
        }
        let more = scopes.len() > limit;
        scopes.truncate(limit);
        Ok(ScopePage {
            next_cursor: if more {
                scopes.last().map(|(h, _)| hex::encode(h))
            } else {
                None
            },
            scopes: scopes.into_iter().map(|(_, s)| s).collect(),
        })
    }

    async fn status(&self) -> Result<ArtifactStatus> {
        let client = self
            .db
            .client(Deadline::after(self.limits.call_timeout()))
            .await?;
        let row = client
            .query_one("SELECT count, bytes FROM artifact_totals", &[])
            .await
            .map_err(db_error)?;
        Ok(ArtifactStatus {
            backend: "postgres+object_store".to_owned(),
            artifacts: Some(u(row.get(0))),
            bytes: Some(u(row.get(1))),
            router: None,
        })
    }
}

/// Why a put published nothing, or may have.
enum Unpublished {
    /// Certainly nothing: the content can go.
    Nothing(Error),
    /// The commit's outcome is unknown.
    Unknown(Error),
}

impl PgArtifacts {
    /// The transaction that allocates the version and publishes `key`.
    async fn publish(
        &self,
        scope: &ArtifactScope,
        name: &ArtifactName,
        opts: &PutOptions,
        integrity: &Integrity,
        key: &str,
        deadline: Deadline,
    ) -> std::result::Result<ArtifactMeta, Unpublished> {
        use Unpublished::Nothing;
        let l = &self.limits;
        let mut client = self.db.client(deadline).await.map_err(Nothing)?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| Nothing(db_error(e)))?;
        let scope_json = serde_json::to_string(scope)
            .map_err(|e| Nothing(Error::Corrupt(format!("cannot encode a scope: {e}"))))?;
        let row = tx
            .query_one(
                "INSERT INTO artifact_scopes (key, hash, scope) VALUES ($1, $2, $3) \
                 ON CONFLICT (key) DO UPDATE SET count = artifact_scopes.count \
                 RETURNING id, count, bytes",
                &[&scope_key(scope), &scope.hash().as_slice(), &scope_json],
            )
            .await
            .map_err(|e| Nothing(db_error(e)))?;
        let (scope_id, count, bytes): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        let size = integrity.size;
        if u(count) + 1 > l.max_scope_artifacts {
            return Err(Nothing(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactsPerScope(l.max_scope_artifacts),
            }));
        }
        if u(bytes) + size > l.max_scope_bytes {
            return Err(Nothing(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactBytesPerScope(l.max_scope_bytes),
            }));
        }
        let totals = tx
            .query_one(
                "UPDATE artifact_totals SET count = count + 1, bytes = bytes + $1 RETURNING count, bytes",
                &[&i(size)],
            )
            .await
            .map_err(|e| Nothing(db_error(e)))?;
        if u(totals.get(0)) > l.max_total_artifacts {
            return Err(Nothing(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactsTotal(l.max_total_artifacts),
            }));
        }
        if u(totals.get(1)) > l.max_total_bytes {
            return Err(Nothing(Error::QuotaExceeded {
                limit: QuotaLimit::ArtifactBytesTotal(l.max_total_bytes),
            }));
        }
        let version: i64 = tx
            .query_one(
                "INSERT INTO artifact_names (scope_id, name, high_water) VALUES ($1, $2, 1) \
                 ON CONFLICT (scope_id, name) DO UPDATE SET high_water = artifact_names.high_water + 1 \
                 RETURNING high_water",
                &[&scope_id, &name.as_str()],
            )
            .await
            .map_err(|e| Nothing(db_error(e)))?
            .get(0);
        let meta = ArtifactMeta {
            scope: scope.clone(),
            name: name.clone(),
            version: u(version),
            mime_type: opts.mime_type.clone(),
            size,
            sha256: integrity.sha256,
            chunk_size: integrity.chunk_size,
            created_at_ms: hippocamp_core::time::now_ms(),
            metadata: opts.metadata.clone(),
        };
        let (meta_json, integrity_json) = (
            json(&meta).map_err(Nothing)?,
            json(integrity).map_err(Nothing)?,
        );
        tx.execute(
            "INSERT INTO artifact_versions (scope_id, name, version, size, content, meta, integrity) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&scope_id, &name.as_str(), &version, &i(size), &key, &meta_json, &integrity_json],
        )
        .await
        .map_err(|e| Nothing(db_error(e)))?;
        tx.execute(
            "UPDATE artifact_scopes SET count = count + 1, bytes = bytes + $2 WHERE id = $1",
            &[&scope_id, &i(size)],
        )
        .await
        .map_err(|e| Nothing(db_error(e)))?;
        deadline.check(Stage::Commit).map_err(Nothing)?;
        tx.commit()
            .await
            .map_err(|e| Unpublished::Unknown(db_error(e)))?;
        Ok(meta)
    }
}

/// A catalog record as JSON text.
fn json(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string(v)
        .map_err(|e| Error::Corrupt(format!("cannot encode a catalog record: {e}")))
}
