//! The project layer's trust, checked each time the layer is read (every scan, every call of one of its tools), not once at start.
//!
//! Trust itself (the store, the config digest) belongs to the CLI; the registry only needs to
//! know, at the moment it reads a project layer, whether it still may. A [`ProjectGate`] holds
//! the project directory's identity as it was when trust was checked at start, and the CLI's
//! verdict: a project whose `.toolsmith/config.toml` changed after it was trusted, whose trust
//! was withdrawn, or whose directory was replaced (another directory or a link now at its path)
//! is skipped until trusted again (issue 22, finding 11).

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a project's layer is not read now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Distrust {
    /// Another directory, or a link, is at the project's path since trust was checked.
    #[error("the project directory was replaced since toolsmith started")]
    Replaced,
    /// The project config changed (or appeared, or went away) after the project was trusted.
    #[error("its .toolsmith/config.toml changed since it was trusted")]
    ConfigChanged,
    /// The project is no longer recorded as trusted, or the record cannot be read.
    #[error("it is no longer trusted")]
    NotTrusted,
}

/// The CLI's verdict on a project directory, asked each time its layer is read.
pub type TrustVerdict = Arc<dyn Fn(&Path) -> Result<(), Distrust> + Send + Sync>;

/// Checks, whenever a project layer is read, that the project is still the directory that was
/// trusted and that its trust still holds.
///
/// A closure and not a type of the registry's own, because trust (its store and its config
/// digest) is the CLI's, and the registry must not depend on it.
#[derive(Clone)]
pub struct ProjectGate {
    dir: PathBuf,
    /// The project directory's device and inode when the gate was made; `None` when it could
    /// not be read then, and nothing of the project is read.
    identity: Option<(u64, u64)>,
    /// Paths whose changes may change the verdict (the project's `.toolsmith`, the trust
    /// store's directory): a live registry watches them and rescans.
    watched: Vec<PathBuf>,
    verdict: TrustVerdict,
}

impl fmt::Debug for ProjectGate {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("ProjectGate")
            .field("dir", &self.dir)
            .field("identity", &self.identity)
            .field("watched", &self.watched)
            .finish_non_exhaustive()
    }
}

impl ProjectGate {
    /// A gate for `dir` as it is now (not following a link at `dir` itself), which `verdict`
    /// judges each time the layer is read. A `dir` that cannot be read now is never read.
    pub fn new(dir: &Path, watched: Vec<PathBuf>, verdict: TrustVerdict) -> ProjectGate {
        let identity = std::fs::symlink_metadata(dir)
            .ok()
            .map(|metadata| (metadata.dev(), metadata.ino()));
        ProjectGate {
            dir: dir.to_path_buf(),
            identity,
            watched,
            verdict,
        }
    }

    /// The project directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The paths whose changes may change the verdict.
    pub fn watched(&self) -> &[PathBuf] {
        &self.watched
    }

    /// Whether the project's layer may be read now.
    pub fn check(&self) -> Result<(), Distrust> {
        let same = std::fs::symlink_metadata(&self.dir)
            .is_ok_and(|metadata| Some((metadata.dev(), metadata.ino())) == self.identity);
        if !same {
            return Err(Distrust::Replaced);
        }
        (self.verdict)(&self.dir)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::project_trust::{Distrust, ProjectGate};

    #[test]
    fn a_replaced_directory_or_a_link_in_its_place_is_refused() {
        let temp = tempfile::tempdir().unwrap();
        let project = temp.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let gate = ProjectGate::new(&project, Vec::new(), Arc::new(|_| Ok(())));
        assert_eq!(gate.check(), Ok(()));
        std::fs::rename(&project, temp.path().join("old")).unwrap();
        std::fs::create_dir(&project).unwrap();
        assert_eq!(gate.check(), Err(Distrust::Replaced));
        std::fs::remove_dir(&project).unwrap();
        std::os::unix::fs::symlink(temp.path().join("old"), &project).unwrap();
        assert_eq!(gate.check(), Err(Distrust::Replaced));
        std::fs::remove_file(&project).unwrap();
        assert_eq!(gate.check(), Err(Distrust::Replaced));
    }

    #[test]
    fn the_verdict_is_asked_each_time() {
        let temp = tempfile::tempdir().unwrap();
        let flag = temp.path().join("distrusted");
        let probe = flag.clone();
        let verdict = Arc::new(move |_: &std::path::Path| {
            if probe.exists() {
                Err(Distrust::ConfigChanged)
            } else {
                Ok(())
            }
        });
        let gate = ProjectGate::new(temp.path(), Vec::new(), verdict);
        assert_eq!(gate.check(), Ok(()));
        std::fs::write(&flag, "").unwrap();
        assert_eq!(gate.check(), Err(Distrust::ConfigChanged));
        std::fs::remove_file(&flag).unwrap();
        assert_eq!(gate.check(), Ok(()));
    }
}
