//! `toolsmith trust` and `toolsmith untrust`: record, forget and list the project directories whose layer toolsmith may read.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::args::{TrustArgs, UntrustArgs};
use crate::exit::ExitStatus;
use crate::output;
use crate::settings::{PROJECT_CONFIG, Project};
use crate::trust::{self, TrustOptions, TrustRecord, TrustStore, Verdict};

/// `DIR` taken from `cwd`, else the project (named, or found around `cwd`); canonical.
fn target(dir: Option<&Path>, cwd: &Path, project: &Project) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(dir) => cwd.join(dir),
        None => project.dir.clone(),
    };
    Ok(trust::canonical(&dir)?)
}

/// Records the directory as trusted with its config as it is now.
pub(crate) fn trust(
    args: &TrustArgs,
    cwd: &Path,
    project: &Project,
    state_dir: Option<&Path>,
    options: &TrustOptions,
) -> anyhow::Result<ExitStatus> {
    let mut store = TrustStore::load(state_dir)?;
    if args.list {
        return list(args.json, &store, options);
    }
    let dir = target(args.dir.as_deref(), cwd, project)?;
    let record = store.trust(&dir)?;
    let tools = count_files(&dir.join(".toolsmith/tools"));
    if args.json {
        output::write_json(&json!({
            "trusted": record_json(&record, Verdict::Recorded),
            "store": store.path(),
            "tool_files": tools,
        }))?;
    } else {
        let config = match record.config.as_str() {
            "absent" => format!("no {PROJECT_CONFIG}"),
            digest => format!("{PROJECT_CONFIG} {}", short_digest(digest)),
        };
        output::write_text(&format!(
            "trusted {} ({config}, {tools} file(s) in .toolsmith/tools); a changed config must be trusted again\n",
            dir.display()
        ))?;
    }
    Ok(ExitStatus::Success)
}

/// Forgets the directory; says so when `[trust] paths` still trusts it.
pub(crate) fn untrust(
    args: &UntrustArgs,
    cwd: &Path,
    project: &Project,
    state_dir: Option<&Path>,
    options: &TrustOptions,
) -> anyhow::Result<ExitStatus> {
    let mut store = TrustStore::load(state_dir)?;
    let dir = target(args.dir.as_deref(), cwd, project)?;
    let removed = store.untrust(&dir)?;
    let still = match store.verdict(&dir, options) {
        Verdict::PreTrusted(root) => Some(root),
        _ => None,
    };
    if args.json {
        output::write_json(&json!({
            "path": dir,
            "removed": removed,
            "pre_trusted_by": still,
        }))?;
    } else {
        let mut text = if removed {
            format!("untrusted {}\n", dir.display())
        } else {
            format!("{} was not trusted\n", dir.display())
        };
        if let Some(root) = still {
            text.push_str(&format!(
                "note: the user config's [trust] paths still trusts it (through {})\n",
                root.display()
            ));
        }
        output::write_text(&text)?;
    }
    Ok(ExitStatus::Success)
}

/// `trust --list`: the recorded directories with their state now, then `[trust] paths`.
fn list(json: bool, store: &TrustStore, options: &TrustOptions) -> anyhow::Result<ExitStatus> {
    let no_paths = TrustOptions {
        paths: Vec::new(),
        project_may_loosen: options.project_may_loosen,
    };
    let rows: Vec<(&TrustRecord, Verdict)> = store
        .records()
        .iter()
        .map(|record| (record, state(store, record, &no_paths)))
        .collect();
    if json {
        output::write_json(&json!({
            "store": store.path(),
            "trusted": rows
                .iter()
                .map(|(record, verdict)| record_json(record, verdict.clone()))
                .collect::<Vec<_>>(),
            "pre_trusted": options.paths,
            "project_may_loosen": options.project_may_loosen,
        }))?;
        return Ok(ExitStatus::Success);
    }
    let mut text = String::new();
    if rows.is_empty() && options.paths.is_empty() {
        text.push_str("no trusted directories (`toolsmith trust DIR` trusts one)\n");
    }
    for (record, verdict) in &rows {
        let note = match verdict {
            Verdict::Recorded => String::new(),
            Verdict::ConfigChanged => {
                format!("  (its {PROJECT_CONFIG} changed: not trusted until trusted again)")
            }
            _ => "  (missing)".to_owned(),
        };
        text.push_str(&format!("{}{note}\n", record.path.display()));
    }
    for path in &options.paths {
        text.push_str(&format!(
            "{}  (and below, from the user config's [trust] paths)\n",
            path.display()
        ));
    }
    output::write_text(&text)?;
    Ok(ExitStatus::Success)
}

/// The state of one record now: trusted, changed config, or a directory that is gone.
fn state(store: &TrustStore, record: &TrustRecord, options: &TrustOptions) -> Verdict {
    if !record.path.is_dir() {
        return Verdict::Untrusted;
    }
    store.verdict(&record.path, options)
}

fn record_json(record: &TrustRecord, verdict: Verdict) -> serde_json::Value {
    let status = match verdict {
        Verdict::Untrusted => "missing",
        other => other.as_str(),
    };
    json!({
        "path": record.path,
        "config": record.config,
        "trusted_at": record.trusted_at,
        "status": status,
    })
}

/// `sha256:` and the first 12 hex digits, enough to tell two configs apart by eye.
fn short_digest(digest: &str) -> String {
    digest.chars().take("sha256:".len() + 12).collect()
}

/// The number of entries in `dir` that are not hidden; 0 when it does not exist.
fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
            .count()
    })
}
