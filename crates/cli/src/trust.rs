//! Project trust: which project directories the user allowed toolsmith to read, recorded in the user's state directory.
//!
//! A project's layer (its `.toolsmith/tools`, its `.toolsmith/config.toml`, and the peers'
//! project tool directories) is written by whoever wrote the repository, so toolsmith neither
//! probes its tools nor reads its config until the user trusts it, as direnv (`direnv allow`)
//! and mise (`mise trust`) do. A [`TrustStore`] keeps one record per directory: its canonical
//! path and the SHA-256 of its `.toolsmith/config.toml` (or of its absence), so that a config
//! changed after the user looked at it needs trusting again. The user config's
//! `[trust] paths` trusts directories (and everything below them) without a record, for CI.
//!
//! The store is `$XDG_STATE_HOME/toolsmith/trust.json` (default
//! `~/.local/state/toolsmith/trust.json`), replaced atomically (a temporary file renamed over
//! it), so a crash never leaves half a file.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest as _, Sha256};
use toolsmith_registry::{
    Distrust, Links, MAX_CONFIG_BYTES, MAX_TRUST_STORE_BYTES, ProjectGate, TrustVerdict,
    read_regular,
};

use crate::env_vars::EnvVars;
use crate::settings::{ConfigError, ConfigFile, PROJECT_CONFIG, RawTrustOptions};
use crate::settings::{GlobalSettings, Options};
use crate::tighten::{Loosening, tighten};

/// The file of the store, in the state directory.
pub(crate) const TRUST_FILE: &str = "trust.json";

/// The version of the store's format; a file of another version is refused, never overwritten.
const FORMAT_VERSION: u64 = 1;

/// Why the trust store could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrustError {
    /// No state directory: neither `XDG_STATE_HOME` nor `HOME` is set.
    #[error("no state directory to record trust in (set HOME or XDG_STATE_HOME)")]
    NoStateDir,
    /// The store exists but cannot be read.
    #[error("cannot read the trust store {path}", path = path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The store is not a trust store this toolsmith understands.
    #[error("the trust store {path} is not valid", path = path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// The store was written by another version of toolsmith.
    #[error("the trust store {path} has format version {version}, this toolsmith reads version {FORMAT_VERSION}", path = path.display())]
    Version { path: PathBuf, version: u64 },
    /// The store cannot be written.
    #[error("cannot write the trust store {path}", path = path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The directory to trust does not exist or cannot be resolved.
    #[error("cannot resolve the directory {path}", path = path.display())]
    Directory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The generator would write tools into a project the user has not trusted.
    #[error("the project {project} is not trusted, so toolsmith writes no tool into {tools_dir}", project = project.display(), tools_dir = tools_dir.display())]
    UntrustedGeneration {
        project: PathBuf,
        tools_dir: PathBuf,
    },
    /// The project config cannot be read to compute its digest.
    #[error("cannot read {path}", path = path.display())]
    Config {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl TrustError {
    /// A suggestion printed after the error.
    pub(crate) fn hint(&self) -> Option<String> {
        match self {
            TrustError::Parse { path, .. } | TrustError::Version { path, .. } => Some(format!(
                "move {} aside and trust your projects again (`toolsmith trust DIR`)",
                path.display()
            )),
            TrustError::UntrustedGeneration { .. } => Some(UNTRUSTED_GENERATION_HINT.to_owned()),
            _ => None,
        }
    }
}

/// One trusted directory, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TrustRecord {
    /// The directory's canonical path.
    pub(crate) path: PathBuf,
    /// `sha256:<hex>` of its `.toolsmith/config.toml`, or `absent`.
    pub(crate) config: String,
    /// When it was trusted, in seconds since the Unix epoch.
    pub(crate) trusted_at: u64,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct StoreFile {
    version: u64,
    trusted: Vec<TrustRecord>,
}

/// The recorded trust, loaded from the state directory.
#[derive(Debug, Clone)]
pub(crate) struct TrustStore {
    /// The store's file.
    path: PathBuf,
    records: Vec<TrustRecord>,
}

/// What the user config says about trust (`[trust]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TrustOptions {
    /// Directories trusted with everything below them, whatever their config says.
    pub(crate) paths: Vec<PathBuf>,
    /// Whether a trusted project config may loosen the user's settings.
    pub(crate) project_may_loosen: bool,
}

/// Whether a directory is trusted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `toolsmith trust` recorded it with the config it has now.
    Recorded,
    /// The user config's `[trust] paths` names it or a directory above it.
    PreTrusted(PathBuf),
    /// Never trusted.
    Untrusted,
    /// Trusted once, but its config changed since (or appeared, or went away).
    ConfigChanged,
}

impl Verdict {
    /// Whether the directory's layer may be read.
    pub(crate) fn is_trusted(&self) -> bool {
        matches!(self, Verdict::Recorded | Verdict::PreTrusted(_))
    }

    /// The verdict's name in JSON: `trusted`, `pre-trusted`, `untrusted` or `config-changed`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Verdict::Recorded => "trusted",
            Verdict::PreTrusted(_) => "pre-trusted",
            Verdict::Untrusted => "untrusted",
            Verdict::ConfigChanged => "config-changed",
        }
    }
}

/// `$XDG_STATE_HOME/toolsmith`, else `~/.local/state/toolsmith`; a relative `XDG_STATE_HOME`
/// is ignored, as the XDG specification asks.
pub(crate) fn state_dir(lookup: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let non_empty = |name: &str| lookup(name).filter(|value| !value.is_empty());
    non_empty(EnvVars::XDG_STATE_HOME)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| non_empty(EnvVars::HOME).map(|home| Path::new(&home).join(".local/state")))
        .map(|dir| dir.join("toolsmith"))
}

/// The digest of `dir`'s project config as recorded: `sha256:<hex>`, or `absent`.
pub(crate) fn config_digest(dir: &Path) -> Result<String, TrustError> {
    let path = dir.join(PROJECT_CONFIG);
    match read_regular(&path, Links::WithinDirectory, MAX_CONFIG_BYTES) {
        Ok(bytes) => Ok(digest_of(Some(&bytes))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(digest_of(None)),
        Err(source) => Err(TrustError::Config { path, source }),
    }
}

/// The recorded form of a config's bytes, or of its absence.
fn digest_of(bytes: Option<&[u8]>) -> String {
    match bytes {
        Some(bytes) => {
            let digest = Sha256::digest(bytes);
            let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
            format!("sha256:{hex}")
        }
        None => "absent".to_owned(),
    }
}

/// `dir` made absolute with symbolic links resolved, so one directory has one record.
pub(crate) fn canonical(dir: &Path) -> Result<PathBuf, TrustError> {
    dir.canonicalize().map_err(|source| TrustError::Directory {
        path: dir.to_path_buf(),
        source,
    })
}

impl TrustStore {
    /// The store in `state_dir`; an absent file is an empty store.
    pub(crate) fn load(state_dir: Option<&Path>) -> Result<TrustStore, TrustError> {
        let path = state_dir.ok_or(TrustError::NoStateDir)?.join(TRUST_FILE);
        let read =
            read_regular(&path, Links::WithinDirectory, MAX_TRUST_STORE_BYTES).and_then(|bytes| {
                String::from_utf8(bytes).map_err(|error| {
                    std::io::Error::new(std::io::ErrorKind::InvalidData, error.utf8_error())
                })
            });
        let text = match read {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(TrustStore {
                    path,
                    records: Vec::new(),
                });
            }
            Err(source) => return Err(TrustError::Read { path, source }),
        };
        let file: StoreFile = match serde_json::from_str(&text) {
            Ok(file) => file,
            Err(source) => return Err(TrustError::Parse { path, source }),
        };
        if file.version != FORMAT_VERSION {
            return Err(TrustError::Version {
                path,
                version: file.version,
            });
        }
        Ok(TrustStore {
            path,
            records: file.trusted,
        })
    }

    /// An empty store that cannot be saved: used when no state directory is known, so that
    /// nothing is trusted but the commands that do not need trust still work.
    pub(crate) fn empty() -> TrustStore {
        TrustStore {
            path: PathBuf::new(),
            records: Vec::new(),
        }
    }

    /// The store's file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The recorded directories, sorted by path.
    pub(crate) fn records(&self) -> &[TrustRecord] {
        &self.records
    }

    /// Whether `dir` (canonical) is trusted with the config it has now.
    pub(crate) fn verdict(&self, dir: &Path, options: &TrustOptions) -> Verdict {
        if let Some(root) = options.paths.iter().find(|root| dir.starts_with(root)) {
            return Verdict::PreTrusted(root.clone());
        }
        let Some(record) = self.records.iter().find(|record| record.path == dir) else {
            return Verdict::Untrusted;
        };
        match config_digest(dir) {
            Ok(digest) if digest == record.config => Verdict::Recorded,
            _ => Verdict::ConfigChanged,
        }
    }

    /// Like [`TrustStore::verdict`], for a config whose bytes the caller already read, so that
    /// the bytes checked are the bytes parsed.
    fn verdict_of_bytes(&self, dir: &Path, bytes: &[u8], options: &TrustOptions) -> Verdict {
        if let Some(root) = options.paths.iter().find(|root| dir.starts_with(root)) {
            return Verdict::PreTrusted(root.clone());
        }
        match self.records.iter().find(|record| record.path == dir) {
            None => Verdict::Untrusted,
            Some(record) if record.config == digest_of(Some(bytes)) => Verdict::Recorded,
            Some(_) => Verdict::ConfigChanged,
        }
    }

    /// Records `dir` (canonical) as trusted with its config as it is now, replacing an older
    /// record of it, and saves the store.
    pub(crate) fn trust(&mut self, dir: &Path) -> Result<TrustRecord, TrustError> {
        let record = TrustRecord {
            path: dir.to_path_buf(),
            config: config_digest(dir)?,
            trusted_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_secs()),
        };
        self.records.retain(|existing| existing.path != dir);
        self.records.push(record.clone());
        self.records
            .sort_by(|left, right| left.path.cmp(&right.path));
        self.save()?;
        Ok(record)
    }

    /// Forgets `dir`; returns whether it was recorded. The store is saved only if it changed.
    pub(crate) fn untrust(&mut self, dir: &Path) -> Result<bool, TrustError> {
        let before = self.records.len();
        self.records.retain(|record| record.path != dir);
        if self.records.len() == before {
            return Ok(false);
        }
        self.save()?;
        Ok(true)
    }

    /// Writes the store to a temporary file next to it, then renames it over the store.
    fn save(&self) -> Result<(), TrustError> {
        let write_error = |source| TrustError::Write {
            path: self.path.clone(),
            source,
        };
        let dir = self
            .path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .ok_or(TrustError::NoStateDir)?;
        std::fs::create_dir_all(dir).map_err(write_error)?;
        let text = serde_json::to_string_pretty(&StoreFile {
            version: FORMAT_VERSION,
            trusted: self.records.clone(),
        })
        .map_err(|error| write_error(std::io::Error::other(error)))?;
        let temporary = dir.join(format!(".{TRUST_FILE}.{}.tmp", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut file = std::fs::File::create(&temporary)?;
            file.write_all(text.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)
        })();
        if let Err(source) = written {
            let _ignored = std::fs::remove_file(&temporary);
            return Err(write_error(source));
        }
        Ok(())
    }
}

/// One directory whose layer was considered, and what its trust decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrustUnit {
    /// The directory, canonical when it exists.
    pub(crate) dir: PathBuf,
    pub(crate) verdict: Verdict,
    /// What exists of its layer and was not read because it is not trusted.
    pub(crate) skipped: Vec<PathBuf>,
}

/// What project trust decided for this command.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TrustReport {
    /// The project directory first (its tools, and its config when it is the current
    /// directory), then the current directory when its config is read from below the project.
    pub(crate) units: Vec<TrustUnit>,
    /// The values of the trusted project config that were not applied.
    pub(crate) loosenings: Vec<Loosening>,
    /// The project config that was read, if any.
    pub(crate) project_config: Option<PathBuf>,
    /// Whether the project config had a `[trust]` section, which only the user may write.
    pub(crate) ignored_trust_section: bool,
    /// `[trust] project_may_loosen`.
    pub(crate) project_may_loosen: bool,
}

impl TrustReport {
    /// Whether the project's tool directories may be read.
    pub(crate) fn project_trusted(&self) -> bool {
        self.units
            .first()
            .is_none_or(|unit| unit.verdict.is_trusted())
    }

    /// The units that skipped something, for the `hint:` line.
    pub(crate) fn skipped(&self) -> impl Iterator<Item = &TrustUnit> {
        self.units.iter().filter(|unit| !unit.skipped.is_empty())
    }

    /// The one-line stderr notices: a skipped layer (with the command that trusts it), each
    /// refused loosening value, and an ignored `[trust]` section.
    pub(crate) fn notices(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for unit in self.skipped() {
            let what: Vec<String> = unit
                .skipped
                .iter()
                .map(|path| {
                    path.strip_prefix(&unit.dir)
                        .unwrap_or(path)
                        .display()
                        .to_string()
                })
                .collect();
            let why = match unit.verdict {
                Verdict::ConfigChanged => format!(
                    "its {PROJECT_CONFIG} changed since it was trusted; review it, then run"
                ),
                _ => "run".to_owned(),
            };
            lines.push(format!(
                "hint: skipped the untrusted project layer of {} ({}); {why} `toolsmith trust {}` to use it",
                unit.dir.display(),
                what.join(", "),
                shell_word(&unit.dir),
            ));
        }
        if let Some(config) = &self.project_config {
            for loosening in &self.loosenings {
                lines.push(if loosening.user_config_only() {
                    format!(
                        "warning: {}: {loosening} (only the user config defines and grants secrets)",
                        config.display()
                    )
                } else {
                    format!(
                        "warning: {}: {loosening} (the user config's `[trust] project_may_loosen = true` would allow it)",
                        config.display()
                    )
                });
            }
            if self.ignored_trust_section {
                lines.push(format!(
                    "warning: {}: a project config cannot set [trust]; only the user config can, so it was ignored",
                    config.display()
                ));
            }
        }
        lines
    }
}

/// `path` as one shell word: quoted when it holds anything but plain characters.
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if text
        .chars()
        .all(|character| character.is_ascii_alphanumeric() || "/._-+@%=:,".contains(character))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The `[trust]` options of the user config and of a file named with `--config` (whose
/// `project_may_loosen` wins, and whose `paths` are added), directories resolved.
pub(crate) fn trust_options(
    files: &[Option<&RawTrustOptions>],
    cwd: &Path,
    home: Option<&Path>,
) -> TrustOptions {
    let mut options = TrustOptions::default();
    for raw in files.iter().flatten() {
        for dir in &raw.paths {
            let resolved = dir.resolve(cwd, home);
            options
                .paths
                .push(resolved.canonicalize().unwrap_or(resolved));
        }
        if let Some(may_loosen) = raw.project_may_loosen {
            options.project_may_loosen = may_loosen;
        }
    }
    options
}

/// The trust of the project directory, whose tool directories are read only when trusted.
pub(crate) fn assess_project(
    project: &Path,
    store: &TrustStore,
    options: &TrustOptions,
) -> TrustReport {
    let project = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    TrustReport {
        units: vec![TrustUnit {
            verdict: store.verdict(&project, options),
            dir: project,
            skipped: Vec::new(),
        }],
        project_may_loosen: options.project_may_loosen,
        ..TrustReport::default()
    }
}

/// Reads the project config of `cwd` when its directory is trusted (the project's, or the
/// current directory's own trust when it lies below the project), tightened to `user` unless
/// the user allows loosening; records in `report` what was skipped or not applied.
pub(crate) fn project_config(
    report: &mut TrustReport,
    cwd: &Path,
    store: &TrustStore,
    options: &TrustOptions,
    user: &Options,
    home: Option<&Path>,
) -> Result<Option<ConfigFile>, ConfigError> {
    let project_canonical = report.units[0].dir.clone();
    let config_path = cwd.join(PROJECT_CONFIG);
    if config_path.symlink_metadata().is_err() {
        return Ok(None);
    }
    if through_link(cwd, Path::new(PROJECT_CONFIG)) {
        // Whoever wrote the project could point `.toolsmith` at the user's own directory; a
        // config reached that way is not the project's (issue 22, finding 2).
        tracing::warn!(
            "{} is reached through a symbolic link; toolsmith does not read it",
            config_path.display()
        );
        return Ok(None);
    }
    let shown = PathBuf::from(".").join(PROJECT_CONFIG);
    let bytes =
        read_regular(&config_path, Links::WithinDirectory, MAX_CONFIG_BYTES).map_err(|source| {
            ConfigError::Read {
                path: shown.clone(),
                source,
            }
        })?;
    let cwd_canonical = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let verdict = store.verdict_of_bytes(&cwd_canonical, &bytes, options);
    let unit_index = if cwd_canonical == project_canonical {
        // The project's tools follow the same verdict as its config: one digest, read once.
        report.units[0].verdict = verdict;
        0
    } else {
        report.units.push(TrustUnit {
            verdict,
            dir: cwd_canonical.clone(),
            skipped: Vec::new(),
        });
        1
    };
    if !report.units[unit_index].verdict.is_trusted() {
        report.units[unit_index]
            .skipped
            .push(cwd_canonical.join(PROJECT_CONFIG));
        return Ok(None);
    }
    let mut file = crate::settings::load_bytes(&shown, &bytes)?;
    report.ignored_trust_section = file.trust.take().is_some();
    if options.project_may_loosen {
        report.loosenings = crate::tighten::without_secrets(&mut file.options);
    } else {
        let (tightened, loosenings) = tighten(file.options, user, &project_canonical, cwd, home);
        file.options = tightened;
        report.loosenings = loosenings;
    }
    report.project_config = Some(shown);
    Ok(Some(file))
}

/// Whether any component of `relative` below `dir` is a symbolic link.
fn through_link(dir: &Path, relative: &Path) -> bool {
    let mut path = dir.to_path_buf();
    relative.components().any(|component| {
        path.push(component);
        std::fs::symlink_metadata(&path).is_ok_and(|metadata| metadata.file_type().is_symlink())
    })
}

/// The gate that checks again, each time the project's layer is read (every scan of a live
/// registry, every call of one of its tools), what was checked at start: that the project is
/// the same directory and still trusted with the config it has now (issue 22, finding 11).
/// `None` when no project layer is read (an untrusted project's layers are left out, and so
/// are those of `--tools-dir` and of a directory that is no project).
///
/// A project trusted by `[trust] paths` stays trusted whatever its config says, as at start;
/// its directory must still be the same one. The config is never read again: a config changed
/// while toolsmith runs takes effect at the next start, once trusted again.
pub(crate) fn project_gate(global: &GlobalSettings) -> Option<ProjectGate> {
    if global.explicit_dirs || !global.has_project {
        return None;
    }
    let unit = global.trust.units.first()?;
    let state_dir = global.state_dir.clone();
    let verdict: TrustVerdict = match &unit.verdict {
        Verdict::PreTrusted(_) => Arc::new(|_: &Path| Ok(())),
        Verdict::Recorded => {
            Arc::new(move |dir: &Path| recorded_verdict(dir, state_dir.as_deref()))
        }
        Verdict::Untrusted | Verdict::ConfigChanged => return None,
    };
    let watched = [unit.dir.clone(), unit.dir.join(PROJECT_CONFIG)]
        .into_iter()
        .chain(global.state_dir.as_ref().map(|dir| dir.join(TRUST_FILE)))
        .collect();
    Some(ProjectGate::new(&unit.dir, watched, verdict))
}

/// Whether `dir` is still recorded in the trust store with the config it has now.
fn recorded_verdict(dir: &Path, state_dir: Option<&Path>) -> Result<(), Distrust> {
    let store = match TrustStore::load(state_dir) {
        Ok(store) => store,
        Err(error) => {
            tracing::warn!(error = %toolsmith_registry::error_chain(&error), "the trust store cannot be read; the project layer is skipped");
            return Err(Distrust::NotTrusted);
        }
    };
    match store.verdict(dir, &TrustOptions::default()) {
        Verdict::Recorded | Verdict::PreTrusted(_) => Ok(()),
        Verdict::ConfigChanged => Err(Distrust::ConfigChanged),
        Verdict::Untrusted => Err(Distrust::NotTrusted),
    }
}

/// Why the generator must not write where it is configured to: the project is not trusted
/// and its tools directory is inside the project. Writing there would either go unread or
/// need the project trusted on the generator's say-so, and nothing but `toolsmith trust` (or
/// the user config) records trust (issue 22, finding 11). `generate`, `new` and the MCP
/// `custom_tool` all refuse alike, with this error and its hint.
pub(crate) fn untrusted_generation(global: &GlobalSettings) -> Option<TrustError> {
    let unit = global.trust.units.first()?;
    if unit.verdict.is_trusted() {
        return None;
    }
    let tools_dir = resolved_beneath(&global.generator_tools_dir);
    tools_dir
        .starts_with(&unit.dir)
        .then(|| TrustError::UntrustedGeneration {
            project: unit.dir.clone(),
            tools_dir: global.generator_tools_dir.clone(),
        })
}

/// The hint after [`untrusted_generation`]'s refusal.
const UNTRUSTED_GENERATION_HINT: &str = "run `toolsmith trust` in the project first (after reading its .toolsmith/), or give the generator a tools directory of your own (`[generator] tools_dir` in the user config)";

/// `path` with its existing ancestors resolved: the longest prefix that exists is made
/// canonical and the rest appended, so a directory yet to be created compares like one that
/// exists.
pub(crate) fn resolved_beneath(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name().map(std::ffi::OsStr::to_os_string) else {
            break;
        };
        rest.push(name);
        if !existing.pop() {
            break;
        }
    }
    let mut resolved = existing.canonicalize().unwrap_or(existing);
    resolved.extend(rest.iter().rev());
    resolved
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::trust::{TrustOptions, TrustStore, Verdict, config_digest};

    #[test]
    fn trust_follows_the_config_digest() {
        let temp = tempfile::tempdir().unwrap();
        let state = temp.path().join("state");
        let project = temp.path().join("project");
        std::fs::create_dir_all(project.join(".toolsmith")).unwrap();
        let options = TrustOptions::default();
        let mut store = TrustStore::load(Some(&state)).unwrap();
        assert_eq!(store.verdict(&project, &options), Verdict::Untrusted);
        store.trust(&project).unwrap();
        assert_eq!(config_digest(&project).unwrap(), "absent");
        let reloaded = TrustStore::load(Some(&state)).unwrap();
        assert_eq!(reloaded.verdict(&project, &options), Verdict::Recorded);
        std::fs::write(project.join(".toolsmith/config.toml"), "[limits]\n").unwrap();
        assert_eq!(reloaded.verdict(&project, &options), Verdict::ConfigChanged);
        let mut store = reloaded;
        store.trust(&project).unwrap();
        assert_eq!(store.verdict(&project, &options), Verdict::Recorded);
        assert!(store.untrust(&project).unwrap());
        assert!(!store.untrust(&project).unwrap());
        assert_eq!(
            TrustStore::load(Some(&state))
                .unwrap()
                .verdict(&project, &options),
            Verdict::Untrusted
        );
    }

    #[test]
    fn pre_trusted_paths_cover_what_is_below_them() {
        let store = TrustStore::empty();
        let options = TrustOptions {
            paths: vec![Path::new("/builds").to_path_buf()],
            project_may_loosen: false,
        };
        assert!(
            store
                .verdict(Path::new("/builds/app"), &options)
                .is_trusted()
        );
        assert!(
            !store
                .verdict(Path::new("/buildsx/app"), &options)
                .is_trusted()
        );
    }

    #[test]
    fn a_store_of_another_version_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::write(
            temp.path().join("trust.json"),
            "{\"version\": 9, \"trusted\": []}",
        )
        .unwrap();
        let error = TrustStore::load(Some(temp.path())).unwrap_err();
        assert!(error.to_string().contains("format version 9"), "{error}");
    }
}
