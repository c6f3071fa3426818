//! The git history of generated tools: a bare repository of its own at `<tools_dir>/.history.git`, one ref `refs/tools/<name>` per tool whose first-parent chain is the tool's versions (version N is the N-th commit of the chain), written with git2's object and ref API, each object read back and synced before the ref moves, and read through [`crate::objects`] (never by libgit2 before that module checked the object).

use std::path::{Path, PathBuf};

use git2::{Oid, Repository, RepositoryInitOptions, Signature};
use serde::Serialize;
use toolsmith_registry::{ToolName, arguments_sha256};

use crate::durable::{sync_path, sync_tree};
use crate::objects::{self, ChainCommit};
use crate::pipeline::CheckReport;
use crate::{Error, RenderedTool};

/// The history repository's directory name inside the tools directory (hidden, so
/// discovery skips it).
pub const HISTORY_DIR: &str = ".history.git";

/// One recorded version of a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Version {
    /// 1 for the first version, counting up.
    pub version: u32,
    /// The commit's id.
    pub commit: String,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// The commit's message (first line).
    pub message: String,
    /// The tool's file name in that version.
    pub file_name: String,
}

/// A commit written but not yet published on the tool's ref.
#[derive(Debug)]
pub(crate) struct Pending {
    repository: PathBuf,
    reference: String,
    commit: Oid,
    /// The ref's target when the commit was written: publishing fails if another writer
    /// moved it since, rather than silently dropping that writer's version.
    parent: Option<Oid>,
    pub(crate) version: u32,
}

impl Pending {
    /// The commit's id.
    pub(crate) fn commit(&self) -> String {
        self.commit.to_string()
    }
}

fn reference(name: &ToolName) -> String {
    format!("refs/tools/{}", name.as_str())
}

fn git_error(path: &Path) -> impl Fn(git2::Error) -> Error + '_ {
    move |source| Error::Git {
        path: path.to_path_buf(),
        source,
    }
}

fn open_or_init(tools_dir: &Path) -> Result<(Repository, PathBuf), Error> {
    let path = tools_dir.join(HISTORY_DIR);
    let repository = if path.exists() {
        Repository::open_bare(&path)
    } else {
        init(&path)
    }
    .map_err(git_error(&path))?;
    Ok((repository, path))
}

/// A new bare repository at `path`, without the sample hooks and other files of git's
/// template directory: nothing ever runs hooks in it, and each file costs a create.
fn init(path: &Path) -> Result<Repository, git2::Error> {
    let mut options = RepositoryInitOptions::new();
    options.bare(true).external_template(false).mkpath(true);
    Repository::init_opts(path, &options)
}

/// Whether the tools directory has a history repository yet.
pub(crate) fn exists(tools_dir: &Path) -> bool {
    tools_dir.join(HISTORY_DIR).exists()
}

/// Makes a new, empty repository at `scratch` (inside the staging directory), synced, with
/// the directory of the tools' refs, for a tools directory that has no history yet: the
/// pipeline does it while the checks run, [`record_fresh`] writes the version once they
/// passed, and [`adopt`] moves the whole repository into place once the file is. A rejected
/// request's repository goes with the staging directory.
pub(crate) fn init_fresh(scratch: &Path) -> Result<PathBuf, Error> {
    init(scratch).map_err(git_error(scratch))?;
    let refs = scratch.join("refs").join("tools");
    std::fs::create_dir_all(&refs).map_err(|source| Error::Io {
        path: refs.clone(),
        source,
    })?;
    sync_tree(scratch)?;
    Ok(scratch.to_path_buf())
}

/// Writes and publishes the first version of `name` in the repository [`init_fresh`] made, with
/// the provenance of `checks` (which all passed).
pub(crate) fn record_fresh(
    scratch: &Path,
    name: &ToolName,
    tool: &RenderedTool,
    message: &str,
    checks: &[CheckReport],
) -> Result<Pending, Error> {
    let repository = Repository::open_bare(scratch).map_err(git_error(scratch))?;
    let pending = write_version(&repository, scratch, name, tool, message, checks)?;
    publish(&pending)?;
    Ok(pending)
}

/// The trailer lines that say a commit was written by the generator after `checks` passed:
/// `Toolsmith-Checks: passed` and the SHA-256 of the check report's canonical JSON.
fn provenance(checks: &[CheckReport]) -> String {
    let report = serde_json::to_value(checks).unwrap_or_default();
    format!(
        "{CHECKS_TRAILER}: passed\n{REPORT_TRAILER}: sha256:{}\n",
        arguments_sha256(&report)
    )
}

/// The trailer that says the generator's checks passed before the commit was written.
const CHECKS_TRAILER: &str = "Toolsmith-Checks";
/// The trailer that holds the digest of the check report.
const REPORT_TRAILER: &str = "Toolsmith-Check-Report";

/// Whether a commit's `message` carries the provenance [`write_version`] records: in its last
/// paragraph, `Toolsmith-Checks: passed` and a `Toolsmith-Check-Report: sha256:<64 hex>`.
///
/// Provenance, not authentication: whoever can write the history can write these lines too,
/// which is why a rollback also runs the checks again before the version goes live.
pub(crate) fn has_provenance(message: &str) -> bool {
    let trailers = message.trim_end().rsplit("\n\n").next().unwrap_or_default();
    let value = |key: &str| {
        trailers.lines().find_map(|line| {
            line.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(": "))
        })
    };
    let digest_ok = value(REPORT_TRAILER)
        .and_then(|value| value.strip_prefix("sha256:"))
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()));
    value(CHECKS_TRAILER) == Some("passed") && digest_ok
}

/// Moves a repository written by [`init_fresh`] and [`record_fresh`] to `<tools_dir>/.history.git` with one
/// `rename`, which publishes its version. `None` when a repository appeared there meanwhile
/// (another process registered a tool): the caller records its version in that one instead.
pub(crate) fn adopt(pending: Pending, tools_dir: &Path) -> Result<Option<Pending>, Error> {
    let target = tools_dir.join(HISTORY_DIR);
    // `rename` replaces only an empty directory, so a repository that appeared meanwhile is
    // never lost.
    match std::fs::rename(&pending.repository, &target) {
        Ok(()) => {
            sync_path(tools_dir)?;
            Ok(Some(Pending {
                repository: target,
                ..pending
            }))
        }
        Err(source)
            if matches!(
                source.kind(),
                std::io::ErrorKind::DirectoryNotEmpty | std::io::ErrorKind::AlreadyExists
            ) =>
        {
            Ok(None)
        }
        Err(source) => Err(Error::Io {
            path: target,
            source,
        }),
    }
}

/// Writes the commit of a new version of `name` holding `tool` (blob, tree, commit), with the
/// provenance of `checks` (which all passed), without moving the tool's ref: [`publish`]
/// does, once the file is in place.
pub(crate) fn prepare(
    tools_dir: &Path,
    name: &ToolName,
    tool: &RenderedTool,
    message: &str,
    checks: &[CheckReport],
) -> Result<Pending, Error> {
    let (repository, path) = open_or_init(tools_dir)?;
    write_version(&repository, &path, name, tool, message, checks)
}

/// The blob, tree and commit of the next version of `name` in `repository` (at `path`), its
/// message ending with the provenance trailers of `checks`.
fn write_version(
    repository: &Repository,
    path: &Path,
    name: &ToolName,
    tool: &RenderedTool,
    message: &str,
    checks: &[CheckReport],
) -> Result<Pending, Error> {
    let error = git_error(path);
    let reference = reference(name);
    let parent = head(repository, &reference).map_err(&error)?;
    let version = match &parent {
        Some(parent) => chain_length(path, *parent)? + 1,
        None => 1,
    };
    // libgit2 reads the parent only after `objects` checked its whole chain.
    let parent = parent
        .map(|parent| repository.find_commit(parent))
        .transpose()
        .map_err(&error)?;
    let blob = repository.blob(tool.contents.as_bytes()).map_err(&error)?;
    let mut tree = repository.treebuilder(None).map_err(&error)?;
    let mode = if tool.executable {
        0o100_755
    } else {
        0o100_644
    };
    tree.insert(&tool.file_name, blob, mode).map_err(&error)?;
    let tree = repository
        .find_tree(tree.write().map_err(&error)?)
        .map_err(&error)?;
    let signature = Signature::now("toolsmith", "toolsmith@localhost").map_err(&error)?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let commit = repository
        .commit(
            None,
            &signature,
            &signature,
            &format!(
                "{} v{version}: {message}\n\n{}",
                name.as_str(),
                provenance(checks)
            ),
            &tree,
            &parents,
        )
        .map_err(&error)?;
    // Read back and synced: libgit2 1.9.7 reports success for a commit it could not write
    // on a full disk, and an object that is not on the disk must never be what a ref names.
    let written = [blob.to_string(), tree.id().to_string(), commit.to_string()];
    objects::sync_objects(path, &written)?;
    Ok(Pending {
        repository: path.to_path_buf(),
        reference,
        commit,
        parent: parent.as_ref().map(git2::Commit::id),
        version,
    })
}

/// Moves the tool's ref to the pending commit, only if it still points where it did when
/// the commit was written (a compare-and-swap: two writers of one tool cannot both win).
pub(crate) fn publish(pending: &Pending) -> Result<(), Error> {
    let error = git_error(&pending.repository);
    let repository = Repository::open_bare(&pending.repository).map_err(&error)?;
    let message = format!("toolsmith: version {}", pending.version);
    match pending.parent {
        Some(parent) => repository.reference_matching(
            &pending.reference,
            pending.commit,
            true,
            parent,
            &message,
        ),
        None => repository.reference(&pending.reference, pending.commit, false, &message),
    }
    .map_err(&error)?;
    sync_ref(pending)
}

/// Waits until the tool's ref file and its directory are on the disk.
fn sync_ref(pending: &Pending) -> Result<(), Error> {
    let file = pending.repository.join(&pending.reference);
    if file.exists() {
        sync_path(&file)?;
    }
    match file.parent() {
        Some(dir) => sync_path(dir),
        None => Ok(()),
    }
}

/// Puts the tool's ref back where it was before [`publish`], if it still names the pending
/// commit: the version did not go live, so the history must not record it.
pub(crate) fn unpublish(pending: &Pending) -> Result<(), Error> {
    let error = git_error(&pending.repository);
    let repository = Repository::open_bare(&pending.repository).map_err(&error)?;
    let message = format!("toolsmith: version {} did not go live", pending.version);
    match pending.parent {
        Some(parent) => repository
            .reference_matching(&pending.reference, parent, true, pending.commit, &message)
            .map(drop),
        None => match repository.find_reference(&pending.reference) {
            Ok(mut found) if found.target() == Some(pending.commit) => found.delete(),
            Ok(_) => Ok(()),
            Err(missing) if missing.code() == git2::ErrorCode::NotFound => Ok(()),
            Err(other) => Err(other),
        },
    }
    .map_err(&error)?;
    sync_ref(pending)
}

/// Withdraws the head `head` (version `version`) of `name`'s chain: the recovery of a
/// registration that ended before its file went live.
pub(crate) fn withdraw(
    tools_dir: &Path,
    name: &ToolName,
    head: &ChainCommit,
    version: u32,
) -> Result<(), Error> {
    let repository = tools_dir.join(HISTORY_DIR);
    let error = git_error(&repository);
    let oid = |id: &str| Oid::from_str(id).map_err(&error);
    let pending = Pending {
        reference: reference(name),
        commit: oid(&head.id)?,
        parent: head.parent.as_deref().map(oid).transpose()?,
        version,
        repository: repository.clone(),
    };
    unpublish(&pending)
}

/// The commit a ref names, without reading any object.
pub(crate) fn head(repository: &Repository, reference: &str) -> Result<Option<Oid>, git2::Error> {
    match repository.find_reference(reference) {
        Ok(found) => match found.resolve()?.target() {
            Some(target) => Ok(Some(target)),
            None => Err(git2::Error::from_str(
                "the tool's ref is not a direct reference",
            )),
        },
        Err(missing) if missing.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(other) => Err(other),
    }
}

fn chain_length(path: &Path, head: Oid) -> Result<u32, Error> {
    let chain = objects::chain(path, &head.to_string())?;
    Ok(u32::try_from(chain.len()).unwrap_or(u32::MAX))
}

/// The checked chain of `name`, oldest first.
pub(crate) fn chain(tools_dir: &Path, name: &ToolName) -> Result<Vec<ChainCommit>, Error> {
    let path = tools_dir.join(HISTORY_DIR);
    if !path.exists() {
        return Err(Error::NoHistory {
            name: name.as_str().to_owned(),
        });
    }
    let error = git_error(&path);
    let repository = Repository::open_bare(&path).map_err(&error)?;
    let Some(head) = head(&repository, &reference(name)).map_err(&error)? else {
        return Err(Error::NoHistory {
            name: name.as_str().to_owned(),
        });
    };
    let mut commits = objects::chain(&path, &head.to_string())?;
    commits.reverse();
    Ok(commits)
}

/// The versions of a checked chain.
pub(crate) fn versions(chain: &[ChainCommit]) -> Vec<Version> {
    chain
        .iter()
        .enumerate()
        .map(|(index, commit)| Version {
            version: u32::try_from(index + 1).unwrap_or(u32::MAX),
            commit: commit.id.clone(),
            time: commit.time,
            message: commit.summary.clone(),
            file_name: commit
                .entries
                .first()
                .map(|(_mode, name, _id)| name.clone())
                .unwrap_or_default(),
        })
        .collect()
}

/// The recorded versions of `name`, oldest first. Every object of the chain is checked
/// first: a damaged or missing one is an error naming the repair, never a hang or a shorter
/// history.
pub fn history(tools_dir: &Path, name: &ToolName) -> Result<Vec<Version>, Error> {
    Ok(versions(&chain(tools_dir, name)?))
}

/// Checks every tool's history in `tools_dir` (for `toolsmith doctor`): for each tool with a
/// ref, its number of versions, or the error that reading its chain gives. Reads only.
pub fn check_histories(tools_dir: &Path) -> Vec<(String, Result<u32, Error>)> {
    let refs = tools_dir.join(HISTORY_DIR).join("refs").join("tools");
    let Ok(entries) = std::fs::read_dir(&refs) else {
        return Vec::new();
    };
    let mut checks: Vec<(String, Result<u32, Error>)> = entries
        .flatten()
        .filter_map(|entry| {
            let file_name = entry.file_name().to_str()?.to_owned();
            if file_name.ends_with(".lock") {
                return Some((
                    file_name.clone(),
                    Err(Error::StaleLock { path: entry.path() }),
                ));
            }
            let name = ToolName::new(&file_name).ok()?;
            let outcome =
                chain(tools_dir, &name).map(|chain| u32::try_from(chain.len()).unwrap_or(u32::MAX));
            Some((file_name, outcome))
        })
        .collect();
    checks.sort_by(|left, right| left.0.cmp(&right.0));
    checks
}

/// The tool file of the commit `commit` of `name`'s chain, refused unless it is what the
/// generator writes: one file whose name is a file name of that tool (so never a path), an
/// executable or plain file mode, UTF-8 contents.
pub(crate) fn contents(
    tools_dir: &Path,
    name: &ToolName,
    version: u32,
    commit: &ChainCommit,
) -> Result<RenderedTool, Error> {
    let path = tools_dir.join(HISTORY_DIR);
    let foreign = |file_name: &str| Error::ForeignVersion {
        name: name.as_str().to_owned(),
        version,
        file_name: file_name.to_owned(),
    };
    let [(mode, file_name, blob)] = commit.entries.as_slice() else {
        return Err(foreign(&format!("{} tree entries", commit.entries.len())));
    };
    let allowed = crate::staging::tool_files(Path::new(""), name);
    if !allowed
        .iter()
        .any(|allowed| allowed.as_os_str() == file_name.as_str())
    {
        return Err(foreign(file_name));
    }
    let executable = match mode.as_str() {
        "100755" => true,
        "100644" => false,
        _ => return Err(foreign(file_name)),
    };
    let body = objects::read_kind(&path, blob, "blob")?;
    let contents = String::from_utf8(body).map_err(|_| foreign(file_name))?;
    Ok(RenderedTool {
        file_name: file_name.clone(),
        contents,
        executable,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passed() -> Vec<CheckReport> {
        vec![CheckReport::passed("registry", None)]
    }

    /// Every commit the generator writes carries its provenance; a message without it, or with
    /// a malformed digest, does not.
    #[test]
    fn commits_carry_the_provenance_of_their_checks() {
        let temp = tempfile::tempdir().unwrap();
        let name = ToolName::new("say_hi").unwrap();
        let pending = prepare(temp.path(), &name, &tool("v1"), "registered", &passed()).unwrap();
        publish(&pending).unwrap();
        let chain = chain(temp.path(), &name).unwrap();
        assert!(has_provenance(&chain[0].message), "{}", chain[0].message);
        for message in [
            "say_hi v1: registered\n",
            "say_hi v1: registered\n\nToolsmith-Checks: passed\n",
            "say_hi v1: registered\n\nToolsmith-Checks: failed\nToolsmith-Check-Report: sha256:0000000000000000000000000000000000000000000000000000000000000000\n",
            "say_hi v1: registered\n\nToolsmith-Checks: passed\nToolsmith-Check-Report: sha256:00\n",
            "Toolsmith-Checks: passed\nToolsmith-Check-Report: sha256:0000000000000000000000000000000000000000000000000000000000000000\n\nsay_hi v1: later paragraph\n",
        ] {
            assert!(!has_provenance(message), "{message}");
        }
    }

    fn tool(contents: &str) -> RenderedTool {
        RenderedTool {
            file_name: "say_hi".to_owned(),
            contents: contents.to_owned(),
            executable: true,
        }
    }

    /// A first history written aside moves into place whole, its version published.
    #[test]
    fn a_fresh_history_is_adopted_with_its_version() {
        let temp = tempfile::tempdir().unwrap();
        let name = ToolName::new("say_hi").unwrap();
        let scratch = init_fresh(&temp.path().join("scratch.git")).unwrap();
        let pending = record_fresh(&scratch, &name, &tool("v1"), "registered", &passed()).unwrap();
        assert!(!exists(temp.path()));
        let adopted = adopt(pending, temp.path()).unwrap().unwrap();
        assert!(exists(temp.path()) && !scratch.exists());
        let versions = history(temp.path(), &name).unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].commit, adopted.commit());
        let chain = chain(temp.path(), &name).unwrap();
        assert_eq!(
            contents(temp.path(), &name, 1, &chain[0]).unwrap(),
            tool("v1")
        );
    }

    /// A history that appeared while a first one was written aside (another process) is
    /// never replaced: `adopt` declines, and the version goes into the existing one.
    #[test]
    fn a_history_that_appeared_meanwhile_is_kept() {
        let temp = tempfile::tempdir().unwrap();
        let name = ToolName::new("say_hi").unwrap();
        let other = ToolName::new("other_tool").unwrap();
        let scratch = init_fresh(&temp.path().join("scratch.git")).unwrap();
        let pending =
            record_fresh(&scratch, &name, &tool("mine"), "registered", &passed()).unwrap();
        let theirs = prepare(
            temp.path(),
            &other,
            &tool("theirs"),
            "registered",
            &passed(),
        )
        .unwrap();
        publish(&theirs).unwrap();
        assert!(adopt(pending, temp.path()).unwrap().is_none());
        assert_eq!(history(temp.path(), &other).unwrap().len(), 1);
        assert!(matches!(
            history(temp.path(), &name),
            Err(Error::NoHistory { .. })
        ));
        let mine = prepare(temp.path(), &name, &tool("mine"), "registered", &passed()).unwrap();
        publish(&mine).unwrap();
        assert_eq!(history(temp.path(), &name).unwrap().len(), 1);
    }
}
