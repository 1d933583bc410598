//! `hippocamp memory consolidate | runs | apply | revert | lineage`: the
//! consolidation runs of a user and an entry's lineage, on a data
//! directory or through a server (`--server`).
//!
//! On a data directory a run's record lives only as long as the command:
//! `consolidate` runs to its end (auto: written; `--review`: printed, not
//! written), `revert` finds a run's facts by their lineage, and `runs` and
//! `apply` need the server that keeps the records.

use anyhow::bail;
use hippocamp_core::{EntryId, MemoryScope};
use hippocamp_governance::Action;
use hippocamp_memory::lineage::Origin;
use hippocamp_services::consolidation::{ApplyMode, Consolidations, Mode, StartRun};
use serde_json::{Value, json};

use crate::memory_cli::{MemoryCmd, at};

/// The run a command starts, from its flags.
fn start_request(review: bool, origins: &[String]) -> anyhow::Result<StartRun> {
    let origins = origins
        .iter()
        .map(|o| {
            serde_json::from_value::<Origin>(json!(o))
                .map_err(|_| anyhow::anyhow!("--origin is turn, note, file or fact, not `{o}`"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(StartRun {
        mode: Mode::Dedupe,
        apply: if review {
            ApplyMode::Review
        } else {
            ApplyMode::Auto
        },
        origins,
    })
}

/// Runs a consolidation command on the data directory's services.
pub(crate) async fn local(
    services: &hippocamp_services::MemoryServices,
    scope: &MemoryScope,
    cmd: MemoryCmd,
    call: &hippocamp_core::CallOptions,
) -> anyhow::Result<Value> {
    let store = &*services.memory;
    // One command's runs: the record ends with the process.
    let runs = Consolidations::default();
    Ok(match cmd {
        MemoryCmd::Consolidate { review, origin } => {
            let req = start_request(review, &origin)?;
            let call = services
                .ask_consolidate(scope, Action::Consolidate, "start a run", call)
                .await?;
            let run = runs.start(store, scope, &req, &call).await?;
            serde_json::to_value(runs.show(store, scope, &run.id, &call).await?)?
        }
        MemoryCmd::Revert { run } => {
            let call = services
                .ask_consolidate(scope, Action::Consolidate, "revert a run", call)
                .await?;
            serde_json::to_value(runs.revert(store, scope, &run, &call).await?)?
        }
        MemoryCmd::Lineage { id } => {
            let id: EntryId = id.parse()?;
            serde_json::to_value(store.entry_lineage(scope, &id, call).await?)?
        }
        MemoryCmd::Runs { .. } | MemoryCmd::Apply { .. } => bail!(
            "run records are kept by the server that ran them: use --server (a data directory's run ends with its command)"
        ),
        _ => bail!("not a consolidation command"),
    })
}

/// Runs a consolidation command through a server.
pub(crate) async fn remote(
    remote: &crate::remote::Remote,
    base: &[&str],
    cmd: MemoryCmd,
) -> anyhow::Result<Value> {
    use reqwest::Method;
    let runs = at(base, &["consolidations"]);
    match cmd {
        MemoryCmd::Consolidate { review, origin } => {
            let req = serde_json::to_value(start_request(review, &origin)?)?;
            remote
                .json(
                    Method::POST,
                    &runs,
                    &[("wait", "true".to_owned())],
                    Some(&req),
                )
                .await
        }
        MemoryCmd::Runs { run: None } => remote.json(Method::GET, &runs, &[], None).await,
        MemoryCmd::Runs { run: Some(id) } => {
            remote
                .json(Method::GET, &at(base, &["consolidations", &id]), &[], None)
                .await
        }
        MemoryCmd::Apply { run } => {
            let path = at(base, &["consolidations", &run, "apply"]);
            remote.json(Method::POST, &path, &[], None).await
        }
        MemoryCmd::Revert { run } => {
            let path = at(base, &["consolidations", &run, "revert"]);
            remote.json(Method::POST, &path, &[], None).await
        }
        MemoryCmd::Lineage { id } => {
            let path = at(base, &["entries", &id, "lineage"]);
            remote.json(Method::GET, &path, &[], None).await
        }
        _ => bail!("not a consolidation command"),
    }
}
