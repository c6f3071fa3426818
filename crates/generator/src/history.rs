//! The git history of generated tools: a bare repository of its own at `<tools_dir>/.history.git`, one ref `refs/tools/<name>` per tool whose first-parent chain is the tool's versions (version N is the N-th commit of the chain), written with git2's object and ref API only.

use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository, RepositoryInitOptions, Signature};
use serde::Serialize;
use toolsmith_registry::ToolName;

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

/// Writes the first version of `name`, its ref included, into a new repository at `scratch`
/// (inside the staging directory), for a tools directory that has no history yet: the
/// pipeline does it while the checks run, and [`adopt`] moves the whole repository into
/// place once the file is. A rejected request's repository goes with the staging directory.
pub(crate) fn prepare_fresh(
    scratch: &Path,
    name: &ToolName,
    tool: &RenderedTool,
    message: &str,
) -> Result<Pending, Error> {
    let repository = init(scratch).map_err(git_error(scratch))?;
    let pending = write_version(&repository, scratch, name, tool, message)?;
    publish(&pending)?;
    Ok(pending)
}

/// Moves a repository written by [`prepare_fresh`] to `<tools_dir>/.history.git` with one
/// `rename`, which publishes its version. `None` when a repository appeared there meanwhile
/// (another process registered a tool): the caller records its version in that one instead.
pub(crate) fn adopt(pending: Pending, tools_dir: &Path) -> Result<Option<Pending>, Error> {
    let target = tools_dir.join(HISTORY_DIR);
    // `rename` replaces only an empty directory, so a repository that appeared meanwhile is
    // never lost.
    match std::fs::rename(&pending.repository, &target) {
        Ok(()) => Ok(Some(Pending {
            repository: target,
            ..pending
        })),
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

/// Writes the commit of a new version of `name` holding `tool` (blob, tree, commit), without
/// moving the tool's ref: [`publish`] does, once the file is in place.
pub(crate) fn prepare(
    tools_dir: &Path,
    name: &ToolName,
    tool: &RenderedTool,
    message: &str,
) -> Result<Pending, Error> {
    let (repository, path) = open_or_init(tools_dir)?;
    write_version(&repository, &path, name, tool, message)
}

/// The blob, tree and commit of the next version of `name` in `repository` (at `path`).
fn write_version(
    repository: &Repository,
    path: &Path,
    name: &ToolName,
    tool: &RenderedTool,
    message: &str,
) -> Result<Pending, Error> {
    let error = git_error(path);
    let reference = reference(name);
    let parent = match repository.find_reference(&reference) {
        Ok(found) => Some(found.peel_to_commit().map_err(&error)?),
        Err(missing) if missing.code() == git2::ErrorCode::NotFound => None,
        Err(other) => return Err(error(other)),
    };
    let version = match &parent {
        Some(parent) => chain_length(repository, parent.id()).map_err(&error)? + 1,
        None => 1,
    };
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
            &format!("{} v{version}: {message}", name.as_str()),
            &tree,
            &parents,
        )
        .map_err(&error)?;
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
    Ok(())
}

fn chain_length(repository: &Repository, head: Oid) -> Result<u32, git2::Error> {
    let mut length = 0;
    let mut commit = Some(repository.find_commit(head)?);
    while let Some(current) = commit {
        length += 1;
        commit = current.parents().next();
    }
    Ok(length)
}

/// The recorded versions of `name`, oldest first.
pub fn history(tools_dir: &Path, name: &ToolName) -> Result<Vec<Version>, Error> {
    let path = tools_dir.join(HISTORY_DIR);
    if !path.exists() {
        return Err(Error::NoHistory {
            name: name.as_str().to_owned(),
        });
    }
    let error = git_error(&path);
    let repository = Repository::open_bare(&path).map_err(&error)?;
    let head = match repository.find_reference(&reference(name)) {
        Ok(found) => found.peel_to_commit().map_err(&error)?,
        Err(missing) if missing.code() == git2::ErrorCode::NotFound => {
            return Err(Error::NoHistory {
                name: name.as_str().to_owned(),
            });
        }
        Err(other) => return Err(error(other)),
    };
    let mut commits = Vec::new();
    let mut commit = Some(head);
    while let Some(current) = commit {
        commit = current.parents().next();
        commits.push(current);
    }
    commits.reverse();
    commits
        .iter()
        .enumerate()
        .map(|(index, commit)| {
            let tree = commit.tree().map_err(&error)?;
            let file_name = tree
                .iter()
                .next()
                .and_then(|entry| entry.name().ok().map(str::to_owned))
                .unwrap_or_default();
            Ok(Version {
                version: u32::try_from(index + 1).unwrap_or(u32::MAX),
                commit: commit.id().to_string(),
                time: commit.time().seconds(),
                message: commit
                    .summary()
                    .ok()
                    .flatten()
                    .unwrap_or_default()
                    .to_owned(),
                file_name,
            })
        })
        .collect()
}

/// The tool file of one recorded version.
pub(crate) fn contents(tools_dir: &Path, version: &Version) -> Result<RenderedTool, Error> {
    let path = tools_dir.join(HISTORY_DIR);
    let error = git_error(&path);
    let repository = Repository::open_bare(&path).map_err(&error)?;
    let commit = repository
        .find_commit(Oid::from_str(&version.commit).map_err(&error)?)
        .map_err(&error)?;
    let tree = commit.tree().map_err(&error)?;
    let entry = tree
        .get_name(&version.file_name)
        .ok_or_else(|| error(git2::Error::from_str("the version's tree has no tool file")))?;
    let blob = entry
        .to_object(&repository)
        .and_then(|object| object.peel(ObjectType::Blob))
        .map_err(&error)?;
    let blob = blob
        .as_blob()
        .ok_or_else(|| error(git2::Error::from_str("the tool file is not a blob")))?;
    Ok(RenderedTool {
        file_name: version.file_name.clone(),
        contents: String::from_utf8_lossy(blob.content()).into_owned(),
        executable: entry.filemode() == 0o100_755,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let scratch = temp.path().join("scratch.git");
        let pending = prepare_fresh(&scratch, &name, &tool("v1"), "registered").unwrap();
        assert!(!exists(temp.path()));
        let adopted = adopt(pending, temp.path()).unwrap().unwrap();
        assert!(exists(temp.path()) && !scratch.exists());
        let versions = history(temp.path(), &name).unwrap();
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].commit, adopted.commit());
        assert_eq!(contents(temp.path(), &versions[0]).unwrap(), tool("v1"));
    }

    /// A history that appeared while a first one was written aside (another process) is
    /// never replaced: `adopt` declines, and the version goes into the existing one.
    #[test]
    fn a_history_that_appeared_meanwhile_is_kept() {
        let temp = tempfile::tempdir().unwrap();
        let name = ToolName::new("say_hi").unwrap();
        let other = ToolName::new("other_tool").unwrap();
        let pending = prepare_fresh(
            &temp.path().join("scratch.git"),
            &name,
            &tool("mine"),
            "registered",
        )
        .unwrap();
        let theirs = prepare(temp.path(), &other, &tool("theirs"), "registered").unwrap();
        publish(&theirs).unwrap();
        assert!(adopt(pending, temp.path()).unwrap().is_none());
        assert_eq!(history(temp.path(), &other).unwrap().len(), 1);
        assert!(matches!(
            history(temp.path(), &name),
            Err(Error::NoHistory { .. })
        ));
        let mine = prepare(temp.path(), &name, &tool("mine"), "registered").unwrap();
        publish(&mine).unwrap();
        assert_eq!(history(temp.path(), &name).unwrap().len(), 1);
    }
}
