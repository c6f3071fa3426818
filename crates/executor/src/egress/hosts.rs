//! The hosts file the proxy may resolve names from (`TOOLSMITH_EGRESS_HOSTS`),
//! read once and read again only when it may have changed: one `stat` per
//! lookup instead of an open, a read and a parse.
//!
//! What the file said is kept with the identity of the file it was read
//! from (device, inode, size, modification and change times). A change to
//! the file changes its change time, which no program can set back; but the
//! kernel stamps times from a clock that advances in ticks, so a change made
//! in the same tick as the read (or within a coarse file system's
//! granularity) can leave every field as it was. So a copy is trusted only
//! once the file's times are [`SETTLED`] older than the read: until then each
//! lookup reads the file again, exactly as if nothing were kept (the test
//! that rebinds a name rewrites the file between two requests).

use std::io::Read;
use std::net::IpAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How much older than the read a file's times must be for its copy to be
/// trusted: above any file system's timestamp granularity (FAT's 2 s).
const SETTLED: Duration = Duration::from_secs(3);

/// Which file, in which state: what a change cannot leave as it was once settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Identity {
    fn of(metadata: &std::fs::Metadata) -> Identity {
        Identity {
            device: metadata.dev(),
            inode: metadata.ino(),
            size: metadata.size(),
            modified: (metadata.mtime(), metadata.mtime_nsec()),
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// Whether both times lie at least [`SETTLED`] before `read_at`.
    fn settled_before(&self, read_at: SystemTime) -> bool {
        let Ok(read_at) = read_at.duration_since(UNIX_EPOCH) else {
            return false;
        };
        let limit = read_at.saturating_sub(SETTLED);
        [self.modified, self.changed]
            .iter()
            .all(|&(seconds, nanos)| {
                u64::try_from(seconds)
                    .ok()
                    .zip(u32::try_from(nanos).ok())
                    .is_some_and(|(seconds, nanos)| Duration::new(seconds, nanos) < limit)
            })
    }
}

/// The file's text, as last read.
#[derive(Debug)]
struct Copy {
    identity: Identity,
    /// The file was settled when read: while its identity holds, so does the text.
    trusted: bool,
    text: String,
}

/// A hosts-format file and its last copy, shared by every run's proxy.
#[derive(Debug)]
pub(crate) struct HostsFile {
    path: PathBuf,
    copy: Mutex<Option<Copy>>,
}

impl HostsFile {
    pub(crate) fn new(path: PathBuf) -> HostsFile {
        HostsFile {
            path,
            copy: Mutex::new(None),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The addresses the file gives `name`, as it says now.
    pub(crate) fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        let failed = |error: std::io::Error| format!("reading {}: {error}", self.path.display());
        let now = Identity::of(&std::fs::metadata(&self.path).map_err(failed)?);
        let mut copy = self
            .copy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(kept) = copy.as_ref()
            && kept.trusted
            && kept.identity == now
        {
            return Ok(hosts_lookup(&kept.text, name));
        }
        // The identity of what is read, not of what was looked at before opening.
        let mut file = std::fs::File::open(&self.path).map_err(failed)?;
        let identity = Identity::of(&file.metadata().map_err(failed)?);
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(failed)?;
        let found = hosts_lookup(&text, name);
        *copy = Some(Copy {
            identity,
            trusted: identity.settled_before(SystemTime::now()),
            text,
        });
        Ok(found)
    }
}

/// The addresses of `name` in a hosts-format text (`address name...`, `#` comments).
pub(crate) fn hosts_lookup(text: &str, name: &str) -> Vec<IpAddr> {
    let name = name.strip_suffix('.').unwrap_or(name);
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next().unwrap_or_default();
            let mut fields = line.split_whitespace();
            let address: IpAddr = fields.next()?.parse().ok()?;
            fields
                .any(|field| field.eq_ignore_ascii_case(name))
                .then_some(address)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_file_names_addresses() {
        let text = "# test hosts\n203.0.113.10 a.test A2.test\n127.0.0.1 local.test # loop\n::1 six.test\n";
        assert_eq!(
            hosts_lookup(text, "a.test"),
            ["203.0.113.10".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            hosts_lookup(text, "a2.TEST."),
            ["203.0.113.10".parse::<IpAddr>().unwrap()]
        );
        assert_eq!(
            hosts_lookup(text, "six.test"),
            ["::1".parse::<IpAddr>().unwrap()]
        );
        assert!(hosts_lookup(text, "loop").is_empty());
    }

    /// A rewrite of the same size in the same clock tick keeps every field of the
    /// file's identity: the copy of a file changed moments ago is never trusted.
    #[test]
    fn a_file_rewritten_in_place_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        let hosts = HostsFile::new(path.clone());
        for (round, address) in ["203.0.113.10", "203.0.113.20", "203.0.113.30"]
            .iter()
            .cycle()
            .take(30)
            .enumerate()
        {
            std::fs::write(&path, format!("{address} a.test\n")).unwrap();
            assert_eq!(
                hosts.lookup("a.test").unwrap(),
                [address.parse::<IpAddr>().unwrap()],
                "round {round}"
            );
        }
    }

    #[test]
    fn a_copy_is_trusted_only_once_the_file_has_settled() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let identity = Identity::of(&file.as_file().metadata().unwrap());
        let now = SystemTime::now();
        assert!(!identity.settled_before(now));
        assert!(!identity.settled_before(now + SETTLED - Duration::from_millis(100)));
        assert!(identity.settled_before(now + SETTLED + Duration::from_millis(100)));
    }

    #[test]
    fn a_settled_copy_serves_lookups_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        std::fs::write(&path, "203.0.113.10 a.test\n").unwrap();
        let hosts = HostsFile::new(path.clone());
        hosts.lookup("a.test").unwrap();
        // As if read long after its last change: the copy is trusted while the file stays.
        let mut copy = hosts.copy.lock().unwrap();
        let kept = copy.as_mut().unwrap();
        kept.trusted = true;
        kept.text = "203.0.113.99 a.test\n".to_owned();
        drop(copy);
        assert_eq!(
            hosts.lookup("a.test").unwrap(),
            ["203.0.113.99".parse::<IpAddr>().unwrap()]
        );
        // Any change to the file (here, its size) ends the trust.
        std::fs::write(&path, "203.0.113.20 a.test b.test\n").unwrap();
        assert_eq!(
            hosts.lookup("a.test").unwrap(),
            ["203.0.113.20".parse::<IpAddr>().unwrap()]
        );
    }
}
