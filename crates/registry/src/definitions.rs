//! Pinned definitions: the digest of each tool's definition as it was last listed, kept beside the discovery cache, so that a silent change of what an agent sees is reported.
//!
//! A tool's definition is what an agent reads and what bounds its calls: its description,
//! input and output schemas, annotations and declared sandbox. Its digest is the SHA-256 of
//! that definition's canonical JSON ([`definition_sha256`]). Each listing (`toolsmith list`,
//! an MCP `tools/list`) compares the catalog with the digests recorded at the last listing
//! ([`Definitions::observe`]): a tool whose digest differs is a [`DefinitionChange`], which the
//! caller reports (a marker in `list`, a line in the audit log) and which is kept as the tool's
//! last change for `toolsmith doctor`. A tool listed for the first time is recorded, not
//! reported.
//!
//! The record is `definitions.json` in the cache directory, outside every project, so a
//! project cannot rewrite it. It is written atomically; a missing or unreadable file is an
//! empty record, never an error.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Value, json};

use crate::call::audit::{arguments_sha256, rfc3339_utc};
use crate::discovery::catalog::Catalog;
use crate::name::ToolName;
use crate::regular_file::{Links, MAX_CACHE_BYTES, read_regular};
use crate::tool::Tool;

/// The record's file name inside the cache directory.
pub(crate) const DEFINITIONS_FILE: &str = "definitions.json";

/// The SHA-256 (lowercase hex) of `tool`'s definition: its description, input and output
/// schemas, annotations and declared sandbox, as canonical JSON.
pub(crate) fn definition_sha256(tool: &Tool) -> String {
    let annotations = tool.annotations();
    let sandbox = tool.sandbox();
    arguments_sha256(&json!({
        "description": tool.description(),
        "input_schema": tool.input_schema().as_json(),
        "output_schema": tool.output_schema().map(|schema| schema.as_json().clone()),
        "annotations": {
            "title": annotations.title,
            "approval": annotations.approval.as_str(),
            "read_only": annotations.read_only,
            "declared": annotations.declared,
        },
        "sandbox": sandbox.to_json(),
    }))
}

/// A tool whose definition changed since it was last listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionChange {
    /// The tool.
    pub name: ToolName,
    /// The digest recorded at the last listing.
    pub old_sha256: String,
    /// The digest now.
    pub new_sha256: String,
    /// When the change was seen, as RFC 3339 UTC.
    pub seen: String,
}

impl DefinitionChange {
    /// The change as the JSON object of its audit line.
    pub fn to_json(&self) -> Value {
        json!({
            "time": self.seen,
            "event": "definition_changed",
            "tool": self.name.as_str(),
            "old_sha256": self.old_sha256,
            "new_sha256": self.new_sha256,
        })
    }
}

/// The digests recorded at the last listing, and each tool's last change.
#[derive(Debug)]
pub struct Definitions {
    file: Option<PathBuf>,
    digests: BTreeMap<String, String>,
    changes: BTreeMap<String, DefinitionChange>,
    /// Whether a digest was recorded since the file was read.
    dirty: bool,
}

impl Definitions {
    /// The record kept in `dir` (the cache directory); empty when there is none yet or it
    /// cannot be read. [`save`](Definitions::save) writes it back.
    pub fn load(dir: &Path) -> Definitions {
        let file = dir.join(DEFINITIONS_FILE);
        let stored: Value = read_regular(&file, Links::WithinDirectory, MAX_CACHE_BYTES)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        let digests = stored
            .get("digests")
            .and_then(Value::as_object)
            .map(|digests| {
                digests
                    .iter()
                    .filter_map(|(name, digest)| Some((name.clone(), digest.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let changes = stored
            .get("changes")
            .and_then(Value::as_array)
            .map(|changes| changes.iter().filter_map(stored_change).collect())
            .unwrap_or_default();
        Definitions {
            file: Some(file),
            digests,
            changes,
            dirty: false,
        }
    }

    /// A record that is never written (no cache directory).
    pub fn in_memory() -> Definitions {
        Definitions {
            file: None,
            digests: BTreeMap::new(),
            changes: BTreeMap::new(),
            dirty: false,
        }
    }

    /// Compares the tools of `catalog` with the record, records their digests, and returns
    /// the tools whose definition changed since the last listing, by name.
    pub fn observe(&mut self, catalog: &Catalog) -> Vec<DefinitionChange> {
        let seen = rfc3339_utc(SystemTime::now());
        let mut changed = Vec::new();
        for tool in catalog.tools() {
            let new_sha256 = definition_sha256(tool);
            let name = tool.name().as_str().to_owned();
            let previous = self.digests.insert(name.clone(), new_sha256.clone());
            self.dirty |= previous.as_ref() != Some(&new_sha256);
            match previous {
                Some(old_sha256) if old_sha256 != new_sha256 => {
                    let change = DefinitionChange {
                        name: tool.name().clone(),
                        old_sha256,
                        new_sha256,
                        seen: seen.clone(),
                    };
                    self.changes.insert(name, change.clone());
                    changed.push(change);
                }
                _ => {}
            }
        }
        changed
    }

    /// Each tool's last recorded change, by name.
    pub fn last_changes(&self) -> impl Iterator<Item = &DefinitionChange> {
        self.changes.values()
    }

    /// Writes the record (atomically: a temporary file renamed over it), if a digest was
    /// recorded since it was read.
    pub fn save(&mut self) -> std::io::Result<()> {
        let Some(file) = self.file.as_ref().filter(|_| self.dirty) else {
            return Ok(());
        };
        if let Some(dir) = file.parent() {
            fs::create_dir_all(dir)?;
        }
        let stored = json!({
            "digests": self.digests,
            "changes": self.changes.values().map(DefinitionChange::to_json).collect::<Vec<_>>(),
        });
        let temporary = file.with_extension(format!("json.{}.partial", std::process::id()));
        let mut out = fs::File::create(&temporary)?;
        out.write_all(stored.to_string().as_bytes())?;
        out.sync_all()?;
        fs::rename(&temporary, file)?;
        self.dirty = false;
        Ok(())
    }
}

/// A change as stored by [`Definitions::save`].
fn stored_change(value: &Value) -> Option<(String, DefinitionChange)> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let name = ToolName::new(&text("tool")?).ok()?;
    Some((
        name.as_str().to_owned(),
        DefinitionChange {
            name,
            old_sha256: text("old_sha256")?,
            new_sha256: text("new_sha256")?,
            seen: text("time")?,
        },
    ))
}
