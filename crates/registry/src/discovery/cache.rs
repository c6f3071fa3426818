//! The discovery cache: what each tool's probe printed, keyed by the identity of its file, so an unchanged tool is never probed again.
//!
//! An entry is keyed by the file's path and its [`Fingerprint`] (size, modification and
//! status-change times with nanoseconds, inode and device) plus the protocol it was probed with.
//! A file whose fingerprint differs is probed again; a file that is gone is pruned on save.
//!
//! What is stored is the probe's *output* (a `description` that exited 0 within the output
//! cap), not the parsed tool: discovery parses it again, which costs microseconds, so a tool
//! whose output is invalid JSON is a problem on every start without being run again, and the
//! cache holds nothing that a change of the parser could make stale.
//! Failures that can come from the machine rather than the file (a timeout, a limit, a
//! non-zero exit, a signal, a spawn error) are kept only in memory, for the life of one
//! [`LiveRegistry`](crate::discovery::live::LiveRegistry): the next process probes them again, so that
//! installing a missing interpreter fixes a tool without touching it.
//!
//! A file modified less than [`RACY_MARGIN`] before its probe started is not trusted on the
//! next discovery (git's "racily clean" rule): a second edit within the file system's timestamp
//! granularity would leave the fingerprint unchanged.
//!
//! The file is `discovery.json` in the directory the caller names (the CLI uses
//! `$XDG_CACHE_HOME/toolsmith`). It is written atomically (a temporary file renamed over it)
//! and carries [`CACHE_VERSION`]; a missing, unreadable, corrupt or other-version file is an
//! empty cache and a debug log line, never an error.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use toolsmith_executor::LimitKind;

use crate::formats::format::Protocol;
use crate::regular_file::{Links, MAX_CACHE_BYTES, read_regular};

/// The version of the cache file's format; a file of another version is ignored.
///
/// 3: records carry the probes' sandbox (`sandbox`), and a Kodelet tool's `config` is asked
/// at its first call (`config_asked`); records of version 2 were probed under the operator's
/// sandbox, not the probes' own, and are not trusted.
///
/// 4: the fingerprint carries the status-change time (`ctime_secs`, `ctime_nanos`); an entry
/// of version 3 cannot tell a rewrite whose modification time was set back.
pub(crate) const CACHE_VERSION: u32 = 4;

/// The cache file's name inside the cache directory.
pub const CACHE_FILE: &str = "discovery.json";

/// How long before the start of its probe a file must have been last modified for the probe's
/// result to be trusted later. One second covers the coarsest timestamps still in use (ext3,
/// some network file systems); nanosecond file systems only pay one extra probe for a file
/// probed within a second of being written.
pub const RACY_MARGIN: Duration = Duration::from_secs(1);

/// The identity of a file's content, as far as the file system tells it without reading it.
///
/// The size, inode and modification time can all be put back after a rewrite in place
/// (`touch -d`, `utimensat`), so the status-change time is part of it too: the kernel sets
/// it to the current time on every write and every change of the other fields, and no system
/// call sets it to a chosen value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Fingerprint {
    size: u64,
    mtime_secs: i64,
    mtime_nanos: i64,
    ctime_secs: i64,
    ctime_nanos: i64,
    inode: u64,
    device: u64,
}

impl Fingerprint {
    /// The fingerprint of the file `metadata` describes (after following symbolic links).
    pub(crate) fn of(metadata: &fs::Metadata) -> Fingerprint {
        Fingerprint {
            size: metadata.size(),
            mtime_secs: metadata.mtime(),
            mtime_nanos: metadata.mtime_nsec(),
            ctime_secs: metadata.ctime(),
            ctime_nanos: metadata.ctime_nsec(),
            inode: metadata.ino(),
            device: metadata.dev(),
        }
    }

    /// Whether the two fingerprints describe the same content of the same inode: all but the
    /// status-change time agree, which a `rename` of the file sets again.
    fn same_but_renamed(&self, other: &Fingerprint) -> bool {
        self.size == other.size
            && self.mtime_secs == other.mtime_secs
            && self.mtime_nanos == other.mtime_nanos
            && self.inode == other.inode
            && self.device == other.device
    }

    /// The modification time, if it is representable.
    ///
    /// The racy rule and the settling of the live registry go by it, not by the status-change
    /// time: a file set back to an old modification time still needs a new status-change time
    /// to match its entry, which only a second change within the same kernel timestamp tick
    /// (milliseconds) as the one before the probe could give it.
    pub(crate) fn modified(&self) -> Option<SystemTime> {
        let nanos = u32::try_from(self.mtime_nanos).ok()?;
        let since_epoch = Duration::new(u64::try_from(self.mtime_secs).ok()?, nanos);
        SystemTime::UNIX_EPOCH.checked_add(since_epoch)
    }
}

/// What a probe produced, in a form that can be kept and interpreted again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProbeRecord {
    /// It exited 0 within the output cap and printed this.
    Output(Vec<u8>),
    /// It ran past the probe's timeout.
    Timeout(Duration),
    /// It was killed by a CPU or memory limit.
    Limit(LimitKind),
    /// It exited with a non-zero status.
    Exited {
        code: i32,
        first_stderr_line: Option<String>,
        /// What the whole of its stderr says the probes' sandbox refused it.
        blocked: Option<crate::discovery::catalog::ProbeBlocked>,
    },
    /// It was killed by a signal.
    Signaled(i32),
    /// It printed more than the output cap.
    OutputTooLarge(u64),
}

/// What a Kodelet tool's optional `config` subcommand answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigAnswer {
    /// Not asked yet: discovery asks at the tool's first call (or `show`), not when listing,
    /// so that a cold discovery spawns one process per tool.
    NotAsked,
    /// Asked, and the tool does not implement it (a non-zero exit, a timeout, ...).
    NotImplemented,
    /// Asked, and it printed this (exit 0).
    Printed(Vec<u8>),
}

/// Everything the probes of one file produced: the record of the protocol that answered
/// (or of the first one tried, when none did), and what goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probed {
    /// The protocol of `record`: a Kodelet-format file that failed `description` but answered
    /// `--schema` is filed under ikigai's protocol.
    pub(crate) protocol: Protocol,
    pub(crate) record: ProbeRecord,
    /// What a Kodelet tool's optional `config` answered, once asked.
    pub(crate) config: ConfigAnswer,
    /// When `record` failed and the `--schema` fallback was tried too, how that ended; only
    /// for the message, never persisted (a failed probe is not persisted anyway).
    pub(crate) fallback: Option<Box<ProbeRecord>>,
}

impl Probed {
    /// The record of a protocol that needs nothing else.
    pub(crate) fn only(protocol: Protocol, record: ProbeRecord) -> Probed {
        Probed {
            protocol,
            record,
            config: ConfigAnswer::NotAsked,
            fallback: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    fingerprint: Fingerprint,
    probed_at: SystemTime,
    /// The probes' sandbox the record was obtained under (`probe_sandbox_key`).
    sandbox: String,
    probed: Probed,
}

impl Entry {
    /// Whether the entry is written to the cache file: a record that depends only on the file
    /// (what a program printed), of a protocol that runs a program.
    fn is_persistent(&self) -> bool {
        // A failed `--schema` fallback is kept only when it, too, printed something: then both
        // answers are the file's, and a warm start reports exactly what a cold one did.
        let fallback_is_the_files = self
            .probed
            .fallback
            .as_deref()
            .is_none_or(|fallback| matches!(fallback, ProbeRecord::Output(_)));
        matches!(self.probed.record, ProbeRecord::Output(_))
            && fallback_is_the_files
            && Protocol::PERSISTED.contains(&self.probed.protocol)
    }

    /// Whether a later write could have left the fingerprint unchanged.
    fn is_racy(&self) -> bool {
        match self.fingerprint.modified() {
            Some(modified) => modified + RACY_MARGIN > self.probed_at,
            None => true,
        }
    }
}

/// An entry as stored in the file.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct StoredEntry {
    path: PathBuf,
    #[serde(flatten)]
    fingerprint: Fingerprint,
    protocol: String,
    /// The probes' sandbox the output was printed under.
    sandbox: String,
    probed_at_secs: u64,
    probed_at_nanos: u32,
    output: String,
    /// Whether `config` was asked (Kodelet tools, at their first call).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    config_asked: bool,
    /// What `config` printed, for Kodelet tools that implement it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<String>,
    /// What the `--schema` fallback printed, when `description` printed something unusable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fallback: Option<String>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct StoredCache {
    version: u32,
    entries: Vec<StoredEntry>,
}

/// Only the version, read first so that a file of another version is told apart from a corrupt one.
#[derive(Debug, serde::Deserialize)]
struct StoredVersion {
    version: u32,
}

/// Why the cache could not be written. Reading never fails: a bad file is an empty cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The cache directory could not be created.
    #[error("cannot create the cache directory {dir}", dir = dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The IO failure.
        #[source]
        source: io::Error,
    },
    /// The cache file could not be written or renamed into place.
    #[error("cannot write the discovery cache {path}", path = path.display())]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The IO failure.
        #[source]
        source: io::Error,
    },
}

/// Probe results by file, loaded from and saved to a cache directory, or in memory only.
#[derive(Debug)]
pub struct DiscoveryCache {
    /// The cache file, or `None` for a cache that lives in memory only.
    file: Option<PathBuf>,
    entries: HashMap<PathBuf, Entry>,
    /// Whether a persistent entry changed since the file was read.
    dirty: bool,
}

impl DiscoveryCache {
    /// A cache that is never written to disk: within one [`LiveRegistry`](crate::discovery::live::LiveRegistry)
    /// it still spares re-probing unchanged files.
    pub fn in_memory() -> DiscoveryCache {
        DiscoveryCache {
            file: None,
            entries: HashMap::new(),
            dirty: false,
        }
    }

    /// The cache stored in `dir` (e.g. `~/.cache/toolsmith`), empty when there is no usable
    /// file there. [`save`](DiscoveryCache::save) writes it back.
    pub fn load(dir: &Path) -> DiscoveryCache {
        let file = dir.join(CACHE_FILE);
        let entries = match read_entries(&file) {
            Ok(entries) => entries,
            Err(reason) => {
                tracing::debug!(file = %file.display(), reason, "discovery cache ignored");
                HashMap::new()
            }
        };
        DiscoveryCache {
            file: Some(file),
            entries,
            dirty: false,
        }
    }

    /// The cache file, if the cache is stored on disk.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// How many files have a result.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no file has a result.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The result of probing `path` with one of `protocols` in the sandbox `sandbox` (a
    /// `probe_sandbox_key`), if the file has not changed since and the result can be trusted.
    pub(crate) fn get(
        &self,
        path: &Path,
        fingerprint: &Fingerprint,
        protocols: &[Protocol],
        sandbox: &str,
    ) -> Option<&Probed> {
        let entry = self.entries.get(path)?;
        let matches = entry.fingerprint == *fingerprint
            && protocols.contains(&entry.probed.protocol)
            && entry.sandbox == sandbox
            && !entry.is_racy();
        matches.then_some(&entry.probed)
    }

    /// The last result recorded for `path`, changed since or not: what the live registry keeps
    /// showing while a changed file settles.
    pub(crate) fn last(&self, path: &Path) -> Option<&Probed> {
        self.entries.get(path).map(|entry| &entry.probed)
    }

    /// Records the result of the probes of `path` that started at `probed_at` in the sandbox
    /// `sandbox` (a `probe_sandbox_key`).
    pub(crate) fn insert(
        &mut self,
        path: PathBuf,
        fingerprint: Fingerprint,
        probed_at: SystemTime,
        sandbox: String,
        probed: Probed,
    ) {
        let entry = Entry {
            fingerprint,
            probed_at,
            sandbox,
            probed,
        };
        let was_persistent = self.entries.get(&path).is_some_and(Entry::is_persistent);
        self.dirty |= was_persistent || entry.is_persistent();
        self.entries.insert(path, entry);
    }

    /// Records what `config` answered for `path`, if its entry is of the file `fingerprint`
    /// identifies (the tool's first call asks it, after discovery made the entry).
    pub(crate) fn set_config(
        &mut self,
        path: &Path,
        fingerprint: &Fingerprint,
        answer: ConfigAnswer,
    ) {
        if let Some(entry) = self.entries.get_mut(path)
            && entry.fingerprint == *fingerprint
        {
            entry.probed.config = answer;
            self.dirty |= entry.is_persistent();
        }
    }

    /// Records `printed` as what the Kodelet file at `path` answers `config`, for a caller that
    /// wrote the file and knows its answer (the generator, for a file of an embedded template
    /// whose `description` probe printed exactly what it predicted), so that the tool's first
    /// call asks nothing. Only into the entry of the file as it is now (same fingerprint) and
    /// only when `config` was never asked: a real answer is never replaced. Returns whether
    /// it was recorded.
    pub fn record_config(&mut self, path: &Path, printed: &[u8]) -> bool {
        let Ok(metadata) = fs::metadata(path) else {
            return false;
        };
        let fingerprint = Fingerprint::of(&metadata);
        let pending = self.entries.get(path).is_some_and(|entry| {
            entry.fingerprint == fingerprint
                && entry.probed.protocol == Protocol::KodeletDescription
                && entry.probed.config == ConfigAnswer::NotAsked
        });
        if pending {
            self.set_config(path, &fingerprint, ConfigAnswer::Printed(printed.to_vec()));
        }
        pending
    }

    /// What `config` answered for the file at `path` identified by `fingerprint`, if it was
    /// asked and the entry was made in the probes' sandbox `sandbox`.
    pub(crate) fn config_of(
        &self,
        path: &Path,
        fingerprint: &Fingerprint,
        sandbox: &str,
    ) -> Option<&ConfigAnswer> {
        let entry = self.entries.get(path)?;
        (entry.fingerprint == *fingerprint
            && entry.sandbox == sandbox
            && entry.probed.config != ConfigAnswer::NotAsked)
            .then_some(&entry.probed.config)
    }

    /// Files under `installed` what `from` recorded for the file `staged` that was renamed
    /// there, so that the file is not probed again: the registration of a generated tool hands
    /// the live registry the probe its staged checks ran (issue 25).
    ///
    /// The record moves only if it is trusted where it was made (not racily clean) and the file
    /// at `installed` is the very inode that was probed, unchanged but for the status-change
    /// time a `rename` sets: same device, inode, size and modification time. Any write since
    /// the probe sets a modification time later than the trusted one, so a record never
    /// describes content other than what its probe saw. Returns whether it moved; when it did
    /// not, the next discovery probes the file as any other.
    pub fn adopt(&mut self, from: &DiscoveryCache, staged: &Path, installed: &Path) -> bool {
        let Some(entry) = from.entries.get(staged) else {
            return false;
        };
        let Ok(metadata) = fs::metadata(installed) else {
            return false;
        };
        let fingerprint = Fingerprint::of(&metadata);
        if entry.is_racy() || !entry.fingerprint.same_but_renamed(&fingerprint) {
            return false;
        }
        self.insert(
            installed.to_path_buf(),
            fingerprint,
            entry.probed_at,
            entry.sandbox.clone(),
            entry.probed.clone(),
        );
        true
    }

    /// Writes the persistent entries of files that still exist, if anything changed since the
    /// file was read. A cache in memory only is not written.
    pub fn save(&mut self) -> Result<(), CacheError> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let gone: Vec<PathBuf> = self
            .entries
            .keys()
            .filter(|path| !path.exists())
            .cloned()
            .collect();
        for path in gone {
            if let Some(entry) = self.entries.remove(&path) {
                self.dirty |= entry.is_persistent();
            }
        }
        if !self.dirty {
            return Ok(());
        }
        let mut stored: Vec<StoredEntry> = self
            .entries
            .iter()
            .filter_map(|(path, entry)| stored_entry(path, entry))
            .collect();
        stored.sort_by(|left, right| left.path.cmp(&right.path));
        let cache = StoredCache {
            version: CACHE_VERSION,
            entries: stored,
        };
        write_atomically(file, &cache)?;
        self.dirty = false;
        Ok(())
    }
}

fn stored_entry(path: &Path, entry: &Entry) -> Option<StoredEntry> {
    if !entry.is_persistent() {
        return None;
    }
    let ProbeRecord::Output(output) = &entry.probed.record else {
        return None;
    };
    // Output that is not UTF-8 cannot be a JSON description; probing it again is cheap and rare.
    let output = String::from_utf8(output.clone()).ok()?;
    let (config_asked, config) = match &entry.probed.config {
        ConfigAnswer::NotAsked => (false, None),
        ConfigAnswer::NotImplemented => (true, None),
        ConfigAnswer::Printed(config) => (true, Some(String::from_utf8(config.clone()).ok()?)),
    };
    let fallback = match entry.probed.fallback.as_deref() {
        Some(ProbeRecord::Output(fallback)) => Some(String::from_utf8(fallback.clone()).ok()?),
        Some(_) => return None,
        None => None,
    };
    let probed_at = entry
        .probed_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?;
    Some(StoredEntry {
        path: path.to_path_buf(),
        fingerprint: entry.fingerprint,
        protocol: entry.probed.protocol.as_str().to_owned(),
        sandbox: entry.sandbox.clone(),
        probed_at_secs: probed_at.as_secs(),
        probed_at_nanos: probed_at.subsec_nanos(),
        output,
        config_asked,
        config,
        fallback,
    })
}

/// The entries of the cache file, or why there are none.
fn read_entries(file: &Path) -> Result<HashMap<PathBuf, Entry>, String> {
    let bytes = read_regular(file, Links::WithinDirectory, MAX_CACHE_BYTES)
        .map_err(|error| format!("unreadable: {}", crate::message::error_chain(&error)))?;
    let version: StoredVersion =
        serde_json::from_slice(&bytes).map_err(|error| format!("corrupt: {error}"))?;
    if version.version != CACHE_VERSION {
        return Err(format!(
            "version {} is not {CACHE_VERSION}",
            version.version
        ));
    }
    let stored: StoredCache =
        serde_json::from_slice(&bytes).map_err(|error| format!("corrupt: {error}"))?;
    let mut entries = HashMap::new();
    for stored_entry in stored.entries {
        // A protocol this build does not know never matches.
        let Some(protocol) = Protocol::persisted(&stored_entry.protocol) else {
            continue;
        };
        let probed_at = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            stored_entry.probed_at_secs,
            stored_entry.probed_at_nanos,
        ));
        let Some(probed_at) = probed_at else {
            continue;
        };
        let config = match (stored_entry.config_asked, stored_entry.config) {
            (_, Some(config)) => ConfigAnswer::Printed(config.into_bytes()),
            (true, None) => ConfigAnswer::NotImplemented,
            (false, None) => ConfigAnswer::NotAsked,
        };
        entries.insert(
            stored_entry.path,
            Entry {
                fingerprint: stored_entry.fingerprint,
                probed_at,
                sandbox: stored_entry.sandbox,
                probed: Probed {
                    protocol,
                    record: ProbeRecord::Output(stored_entry.output.into_bytes()),
                    config,
                    fallback: stored_entry
                        .fallback
                        .map(|fallback| Box::new(ProbeRecord::Output(fallback.into_bytes()))),
                },
            },
        );
    }
    Ok(entries)
}

/// Writes `cache` to a temporary file beside `file` and renames it over `file`, so that a
/// reader sees the old file or the new one, never a part.
fn write_atomically(file: &Path, cache: &StoredCache) -> Result<(), CacheError> {
    let dir = file.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(|source| CacheError::CreateDir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let bytes = serde_json::to_vec(cache).map_err(|source| CacheError::Write {
        path: file.to_path_buf(),
        source: io::Error::other(source),
    })?;
    // A temporary file of its own for each writer, in the cache's directory so the rename
    // stays on one file system: the last rename wins, and the loser's entries are probed
    // again next time. The mode is the one `File::create` gives (0o666 less the umask), not
    // tempfile's 0o600, so the cache stays as readable as it was.
    let write = || -> io::Result<()> {
        let mut temporary = tempfile::Builder::new()
            .prefix(&format!(".{CACHE_FILE}."))
            .suffix(".tmp")
            .permissions(fs::Permissions::from_mode(0o666))
            .tempfile_in(dir)?;
        temporary.write_all(&bytes)?;
        temporary.persist(file)?;
        Ok(())
    };
    // A failed write or rename drops the temporary file, which removes it.
    write().map_err(|source| CacheError::Write {
        path: file.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use crate::discovery::cache::{
        CACHE_FILE, ConfigAnswer, DiscoveryCache, Fingerprint, ProbeRecord, Probed,
    };
    use crate::formats::format::Protocol;

    const PROTOCOL: Protocol = Protocol::KodeletDescription;

    const HOUR: Duration = Duration::from_secs(3600);

    /// A probes' sandbox key, as `probe_sandbox_key` writes them.
    const SANDBOX: &str = "probe-sandbox/1 network=deny filesystem=read-only pids=private";

    /// Writes `tool` with a modification time an hour ago, so its entries are not racy.
    fn old_file(path: &Path, text: &str) -> Fingerprint {
        fs::write(path, text).unwrap();
        let file = fs::File::options().write(true).open(path).unwrap();
        file.set_modified(SystemTime::now() - HOUR).unwrap();
        Fingerprint::of(&fs::metadata(path).unwrap())
    }

    fn output(text: &str) -> Probed {
        record(ProbeRecord::Output(text.as_bytes().to_vec()))
    }

    fn record(record: ProbeRecord) -> Probed {
        Probed::only(PROTOCOL, record)
    }

    /// Stores `record` for a tool file in a fresh cache directory, saves, lets `change` alter
    /// the world, loads the cache again, and compares what it returns for the tool.
    fn check(probed: Probed, change: impl FnOnce(&Path, &Path), expect: Option<Probed>) {
        let temp = tempfile::tempdir().unwrap();
        let cache_dir = temp.path().join("cache");
        let tool = temp.path().join("tool");
        let fingerprint = old_file(&tool, "#!/bin/sh\n");
        let mut cache = DiscoveryCache::load(&cache_dir);
        assert!(cache.is_empty());
        cache.insert(
            tool.clone(),
            fingerprint,
            SystemTime::now(),
            SANDBOX.to_owned(),
            probed,
        );
        cache.save().unwrap();
        change(&tool, &cache_dir);
        let reloaded = DiscoveryCache::load(&cache_dir);
        let fingerprint = fs::metadata(&tool).ok().map(|meta| Fingerprint::of(&meta));
        let actual = fingerprint.and_then(|fingerprint| {
            reloaded
                .get(&tool, &fingerprint, &[PROTOCOL], SANDBOX)
                .cloned()
        });
        assert_eq!(actual, expect);
    }

    /// A cache file that cannot be renamed into place (a directory holds its name) is a write
    /// error naming the file, and the temporary file is gone: the directory holds what it held.
    #[test]
    fn failed_save_leaves_no_temporary_file() {
        let temp = tempfile::tempdir().unwrap();
        let cache_dir = temp.path().join("cache");
        let tool = temp.path().join("tool");
        let fingerprint = old_file(&tool, "#!/bin/sh\n");
        let mut cache = DiscoveryCache::load(&cache_dir);
        cache.insert(
            tool,
            fingerprint,
            SystemTime::now(),
            SANDBOX.to_owned(),
            output("{}"),
        );
        let blocker = cache_dir.join(CACHE_FILE);
        fs::create_dir_all(blocker.join("occupied")).unwrap();
        let error = cache.save().unwrap_err();
        assert_eq!(
            crate::message::error_chain(&error).split(": ").next(),
            Some(format!("cannot write the discovery cache {}", blocker.display()).as_str())
        );
        let mut left: Vec<String> = fs::read_dir(&cache_dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, [CACHE_FILE]);
    }

    #[test]
    fn roundtrip() {
        check(output("{}"), |_, _| {}, Some(output("{}")));
    }

    #[test]
    fn config_output_roundtrips() {
        let with_config = Probed {
            config: ConfigAnswer::Printed(br#"{"timeout": "30m"}"#.to_vec()),
            ..output("{}")
        };
        check(with_config.clone(), |_, _| {}, Some(with_config));
    }

    /// `record_config` fills a pending `config` of the file as it is, and nothing else: not a
    /// real answer already asked, not a file changed since its probe, not a file never probed.
    #[test]
    fn a_known_config_answer_is_recorded_only_for_the_unchanged_pending_file() {
        let temp = tempfile::tempdir().unwrap();
        let tool = temp.path().join("tool");
        let answer = br#"{"timeout": "30s"}"#;
        let mut cache = DiscoveryCache::in_memory();
        assert!(!cache.record_config(&tool, answer), "no file");
        let fingerprint = old_file(&tool, "#!/bin/sh\n");
        assert!(!cache.record_config(&tool, answer), "never probed");
        cache.insert(
            tool.clone(),
            fingerprint,
            SystemTime::now(),
            SANDBOX.to_owned(),
            output("{}"),
        );
        assert!(cache.record_config(&tool, answer));
        let expect = ConfigAnswer::Printed(answer.to_vec());
        assert_eq!(cache.config_of(&tool, &fingerprint, SANDBOX), Some(&expect));
        assert!(!cache.record_config(&tool, b"{}"), "already answered");
        assert_eq!(cache.config_of(&tool, &fingerprint, SANDBOX), Some(&expect));

        let changed = temp.path().join("changed");
        let fingerprint = old_file(&changed, "#!/bin/sh\n");
        cache.insert(
            changed.clone(),
            fingerprint,
            SystemTime::now(),
            SANDBOX.to_owned(),
            output("{}"),
        );
        old_file(&changed, "#!/bin/sh\nexit 1\n");
        assert!(
            !cache.record_config(&changed, answer),
            "changed since its probe"
        );
    }

    #[test]
    fn config_not_asked_and_not_implemented_roundtrip() {
        let not_implemented = Probed {
            config: ConfigAnswer::NotImplemented,
            ..output("{}")
        };
        check(not_implemented.clone(), |_, _| {}, Some(not_implemented));
        check(output("{}"), |_, _| {}, Some(output("{}")));
    }

    /// Issue 12: a record obtained in one probes' sandbox is not reused in another, in memory
    /// or across processes.
    #[test]
    fn a_record_from_another_probe_sandbox_is_not_reused() {
        let temp = tempfile::tempdir().unwrap();
        let tool = temp.path().join("tool");
        let fingerprint = old_file(&tool, "#!/bin/sh\n");
        let mut cache = DiscoveryCache::load(temp.path());
        let unconfined = "probe-sandbox/1 network=allow filesystem=full pids=shared";
        cache.insert(
            tool.clone(),
            fingerprint,
            SystemTime::now(),
            unconfined.to_owned(),
            output("{}"),
        );
        assert_eq!(cache.get(&tool, &fingerprint, &[PROTOCOL], SANDBOX), None);
        assert_eq!(
            cache.get(&tool, &fingerprint, &[PROTOCOL], unconfined),
            Some(&output("{}"))
        );
        cache.save().unwrap();
        let reloaded = DiscoveryCache::load(temp.path());
        assert_eq!(
            reloaded.get(&tool, &fingerprint, &[PROTOCOL], SANDBOX),
            None
        );
        assert_eq!(
            reloaded.get(&tool, &fingerprint, &[PROTOCOL], unconfined),
            Some(&output("{}"))
        );
    }

    #[test]
    fn touched_file_is_stale() {
        check(
            output("{}"),
            |tool, _| {
                let file = fs::File::options().write(true).open(tool).unwrap();
                file.set_modified(SystemTime::now() - HOUR / 2).unwrap();
            },
            None,
        );
    }

    #[test]
    fn rewritten_file_of_same_size_and_time_is_stale() {
        // A new inode (an atomic replace) is a change even when size and mtime agree.
        check(
            output("{}"),
            |tool, _| {
                let before = fs::metadata(tool).unwrap();
                let replacement = tool.with_extension("new");
                fs::write(&replacement, "#!/bin/sh\n").unwrap();
                let file = fs::File::options().write(true).open(&replacement).unwrap();
                file.set_modified(before.modified().unwrap()).unwrap();
                fs::rename(&replacement, tool).unwrap();
            },
            None,
        );
    }

    #[test]
    fn corrupt_file_is_empty() {
        check(
            output("{}"),
            |_, cache_dir| {
                fs::write(cache_dir.join(CACHE_FILE), "{\"version\": 1, \"entr").unwrap()
            },
            None,
        );
        check(
            output("{}"),
            |_, cache_dir| fs::write(cache_dir.join(CACHE_FILE), [0xff, 0x00, 0x12]).unwrap(),
            None,
        );
    }

    #[test]
    fn other_version_is_empty() {
        check(
            output("{}"),
            |_, cache_dir| {
                let file = cache_dir.join(CACHE_FILE);
                let text = fs::read_to_string(&file).unwrap();
                let other = text.replace(
                    &format!("\"version\":{}", crate::discovery::cache::CACHE_VERSION),
                    "\"version\":999",
                );
                assert_ne!(other, text);
                fs::write(&file, other).unwrap();
            },
            None,
        );
    }

    #[test]
    fn failures_that_may_come_from_the_machine_are_not_persisted() {
        check(
            record(ProbeRecord::Timeout(Duration::from_secs(1))),
            |_, _| {},
            None,
        );
        check(
            record(ProbeRecord::Exited {
                code: 127,
                first_stderr_line: None,
                blocked: None,
            }),
            |_, _| {},
            None,
        );
    }

    #[test]
    fn deleted_file_is_pruned() {
        let temp = tempfile::tempdir().unwrap();
        let tool = temp.path().join("tool");
        let fingerprint = old_file(&tool, "#!/bin/sh\n");
        let mut cache = DiscoveryCache::load(temp.path());
        cache.insert(
            tool.clone(),
            fingerprint,
            SystemTime::now(),
            SANDBOX.to_owned(),
            output("{}"),
        );
        cache.save().unwrap();
        fs::remove_file(&tool).unwrap();
        let mut cache = DiscoveryCache::load(temp.path());
        assert_eq!(cache.len(), 1);
        cache.save().unwrap();
        assert_eq!(DiscoveryCache::load(temp.path()).len(), 0);
    }

    #[test]
    fn racy_entry_is_not_trusted() {
        let temp = tempfile::tempdir().unwrap();
        let tool = temp.path().join("tool");
        fs::write(&tool, "#!/bin/sh\n").unwrap();
        let fingerprint = Fingerprint::of(&fs::metadata(&tool).unwrap());
        let mut cache = DiscoveryCache::in_memory();
        // Probed in the same instant as the write: a second write could keep the mtime.
        let modified = fingerprint.modified().unwrap();
        cache.insert(
            tool.clone(),
            fingerprint,
            modified,
            SANDBOX.to_owned(),
            output("{}"),
        );
        assert_eq!(cache.get(&tool, &fingerprint, &[PROTOCOL], SANDBOX), None);
        cache.insert(
            tool.clone(),
            fingerprint,
            modified + Duration::from_secs(2),
            SANDBOX.to_owned(),
            output("{}"),
        );
        assert_eq!(
            cache.get(&tool, &fingerprint, &[PROTOCOL], SANDBOX),
            Some(&output("{}"))
        );
    }

    /// Issue 25: a probed file renamed into place keeps its record (a registration hands the
    /// live registry its staged probe); a file written since the probe, or one written within
    /// the racy margin of it, does not.
    #[test]
    fn a_renamed_file_keeps_its_record_and_a_rewritten_one_does_not() {
        let adopted = |change: &dyn Fn(&Path), written_long_ago: bool| {
            let temp = tempfile::tempdir().unwrap();
            let staged = temp.path().join("staged");
            let fingerprint = if written_long_ago {
                old_file(&staged, "#!/bin/sh\n")
            } else {
                fs::write(&staged, "#!/bin/sh\n").unwrap();
                Fingerprint::of(&fs::metadata(&staged).unwrap())
            };
            let mut from = DiscoveryCache::in_memory();
            from.insert(
                staged.clone(),
                fingerprint,
                SystemTime::now(),
                SANDBOX.to_owned(),
                output("{}"),
            );
            let installed = temp.path().join("installed");
            fs::rename(&staged, &installed).unwrap();
            change(&installed);
            let mut live = DiscoveryCache::in_memory();
            let moved = live.adopt(&from, &staged, &installed);
            let now = Fingerprint::of(&fs::metadata(&installed).unwrap());
            let found = live.get(&installed, &now, &[PROTOCOL], SANDBOX).cloned();
            assert_eq!(moved, found.is_some());
            found
        };
        assert_eq!(adopted(&|_| {}, true), Some(output("{}")));
        let rewrite = |path: &Path| {
            let file = fs::File::options().write(true).open(path).unwrap();
            file.set_len(0).unwrap();
            fs::write(path, "#!/bin/sh\n").unwrap();
        };
        assert_eq!(adopted(&rewrite, true), None);
        assert_eq!(adopted(&|_| {}, false), None);
    }
}
