//! Restoring a recorded version of a generated tool as a new version: only what the generator recorded after its checks, checked again before it goes live, through the same write-ahead registration as a generated tool.

use std::path::Path;

use toolsmith_registry::{DiscoveryCache, LiveRegistry, ToolName, Toolsmith};

use crate::Error;
use crate::history::{self, Version};
use crate::lock;
use crate::pipeline::{after_commit, go_live_into, not_registered, record, serialize_name};
use crate::recovery;
use crate::render::RenderedTool;
use crate::staged_checks::check_restored;
use crate::staging::{Staging, write_file};

/// The version a rollback restores, as read under the lock.
struct Target {
    version: u32,
    rendered: RenderedTool,
    /// The chain's head when the target was read: the version goes live only if it still is.
    head: Option<String>,
}

/// Restores version `to` (default: the one before the latest) of `name` as a new version,
/// and refreshes `live` when given. Returns the new version.
///
/// Only what the generator itself recorded after its checks is restored: a version whose tree
/// holds one file of that tool (`history::contents`), whose commit carries the generator's
/// provenance trailers (a commit made by hand, or planted in a cloned history, has none), and
/// which passes the checks again, run on the restored file exactly as on a registered one
/// (discovery's, then its declared tests in the sandbox): what the tool depends on may have
/// changed since. Any refusal leaves the live tool as it was, and says why.
///
/// The target is read under the tools directory's lock, the checks run without it (as a
/// registration's do), and the version goes live under the lock only if the tool's history
/// did not move meanwhile; if it did (another rollback or registration of the tool), the
/// target is read again and checked again. So concurrent rollbacks still restore distinct
/// versions and each reports its own, and nobody waits for another's checks.
pub async fn rollback(
    toolsmith: &Toolsmith,
    tools_dir: &Path,
    name: &ToolName,
    to: Option<u32>,
    live: Option<&LiveRegistry>,
) -> Result<Version, Error> {
    let (executor, run_config) = (toolsmith.executor(), toolsmith.config());
    let _serialized = serialize_name(name.as_str()).await;
    if !history::exists(tools_dir) {
        return Err(Error::NoHistory {
            name: name.as_str().to_owned(),
        });
    }
    crate::confine::check_tools_dir(tools_dir)?;
    recovery::sweep_staging(tools_dir);
    let staging = Staging::create(tools_dir, name)?;
    loop {
        let target = {
            let locked = lock::lock(tools_dir, lock::LOCK_PATIENCE).await?;
            recovery::recover(tools_dir, &locked)?;
            crate::confine::check_tools_dir(tools_dir)?;
            read_target(tools_dir, name, to)?
        };
        let staged = staging.dir.join(&target.rendered.file_name);
        // A file of an earlier round, whose target moved: this round's replaces it.
        let _absent = std::fs::remove_file(&staged);
        write_file(&staged, &target.rendered)?;
        let mut probes = DiscoveryCache::in_memory();
        let checks = check_restored(executor, &staging.dir, name, run_config, &mut probes).await?;
        let failed: Vec<String> = checks
            .iter()
            .filter(|check| !check.ok)
            .map(|check| match &check.detail {
                Some(detail) => format!("{}: {detail}", check.name),
                None => check.name.clone(),
            })
            .collect();
        if !failed.is_empty() {
            return Err(Error::RestoredVersionFails {
                name: name.as_str().to_owned(),
                version: target.version,
                failed: failed.join("; "),
            });
        }
        let locked = lock::lock(tools_dir, lock::LOCK_PATIENCE).await?;
        recovery::recover(tools_dir, &locked)?;
        crate::confine::check_tools_dir(tools_dir)?;
        let head = history::chain(tools_dir, name)?
            .last()
            .map(|commit| commit.id.clone());
        if head != target.head {
            continue;
        }
        let message = format!("rollback to v{}", target.version);
        let pending = record(tools_dir, name, &target.rendered, &message, &checks)
            .map_err(|error| not_registered(tools_dir, name, error))?;
        let (path, registration) = go_live_into(
            live,
            tools_dir,
            &staged,
            &target.rendered,
            &pending,
            &probes,
        )
        .await
        .map_err(|error| not_registered(tools_dir, name, error))?;
        after_commit(tools_dir, name, &path);
        let restored =
            history::history(tools_dir, name)?
                .pop()
                .ok_or_else(|| Error::NoHistory {
                    name: name.as_str().to_owned(),
                })?;
        drop(locked);
        drop(staging);
        if let Some((registration, _served)) = registration {
            registration.publish().await;
        }
        return Ok(restored);
    }
}

/// Version `to` (default: the one before the latest) of `name`, refused unless it is a file
/// of that tool recorded by the generator after its checks.
fn read_target(tools_dir: &Path, name: &ToolName, to: Option<u32>) -> Result<Target, Error> {
    let chain = history::chain(tools_dir, name)?;
    let latest = u32::try_from(chain.len()).unwrap_or(u32::MAX);
    let version = to.unwrap_or(latest.saturating_sub(1));
    let Some(commit) = version
        .checked_sub(1)
        .and_then(|index| chain.get(usize::try_from(index).ok()?))
    else {
        return Err(Error::NoSuchVersion {
            name: name.as_str().to_owned(),
            version,
            latest,
        });
    };
    let rendered = history::contents(tools_dir, name, version, commit)?;
    if !history::has_provenance(&commit.message) {
        return Err(Error::UncheckedVersion {
            name: name.as_str().to_owned(),
            version,
            commit: commit.id.clone(),
        });
    }
    Ok(Target {
        version,
        rendered,
        head: chain.last().map(|commit| commit.id.clone()),
    })
}
