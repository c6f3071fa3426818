//! The history's own reading of its loose objects: every object of a tool's chain is inflated and checked here before libgit2 reads it, because libgit2 1.9.7 (the newest any git2 crate vendors) spins forever inflating a truncated loose object, and `git_commit_create` reports success when writing the object failed on a full disk.

use std::fs;
use std::path::{Path, PathBuf};

use flate2::{Decompress, FlushDecompress, Status};

use crate::Error;
use crate::error::Damage;

/// The largest object the history holds: a tool file is far smaller; anything larger is
/// refused unread rather than inflated into memory.
const MAX_OBJECT: usize = 64 << 20;

/// One loose object, inflated and checked: its type and its body.
#[derive(Debug)]
pub(crate) struct Object {
    pub(crate) kind: String,
    pub(crate) body: Vec<u8>,
}

/// One commit of a chain: its id, first parent, time, summary and tree entries.
#[derive(Debug, Clone)]
pub(crate) struct ChainCommit {
    pub(crate) id: String,
    pub(crate) parent: Option<String>,
    pub(crate) time: i64,
    pub(crate) summary: String,
    /// The whole message, its trailers included.
    pub(crate) message: String,
    /// The tree's entries: (mode, name, blob id).
    pub(crate) entries: Vec<(String, String, String)>,
}

fn damaged(repository: &Path, object: &str, damage: Damage) -> Error {
    Error::HistoryDamaged {
        repository: repository.to_path_buf(),
        object: object.to_owned(),
        damage,
    }
}

/// The path of a loose object.
pub(crate) fn loose_path(repository: &Path, id: &str) -> PathBuf {
    let (directory, file) = id.split_at(2.min(id.len()));
    repository.join("objects").join(directory).join(file)
}

/// Whether the repository has pack files (toolsmith never writes any; `git gc` does).
fn has_packs(repository: &Path) -> bool {
    fs::read_dir(repository.join("objects").join("pack")).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|entry| entry.path().extension().is_some_and(|ext| ext == "pack"))
    })
}

/// Inflates a whole zlib stream; `None` when it is truncated, corrupt or too large. Each
/// round either consumes input, produces output or ends: a stream that does neither is
/// truncated, so this always returns.
fn inflate(compressed: &[u8]) -> Option<Vec<u8>> {
    let mut decompress = Decompress::new(true);
    let mut out = Vec::with_capacity(compressed.len().saturating_mul(4).min(MAX_OBJECT) + 64);
    loop {
        if out.len() == out.capacity() {
            if out.len() >= MAX_OBJECT {
                return None;
            }
            out.reserve(out.len().max(4096));
        }
        let consumed = usize::try_from(decompress.total_in()).ok()?;
        let (before_in, before_out) = (decompress.total_in(), decompress.total_out());
        match decompress.decompress_vec(
            compressed.get(consumed..)?,
            &mut out,
            FlushDecompress::Finish,
        ) {
            Ok(Status::StreamEnd) => {
                let consumed = usize::try_from(decompress.total_in()).ok()?;
                return (consumed == compressed.len()).then_some(out);
            }
            Ok(Status::Ok | Status::BufError) => {
                let stuck = decompress.total_in() == before_in
                    && decompress.total_out() == before_out
                    && out.len() < out.capacity();
                if stuck {
                    return None;
                }
            }
            Err(_) => return None,
        }
    }
}

/// Reads and checks the loose object `id`.
pub(crate) fn read(repository: &Path, id: &str) -> Result<Object, Error> {
    if id.len() != 40 || !id.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(damaged(
            repository,
            id,
            Damage::Malformed("not an object id"),
        ));
    }
    let path = loose_path(repository, id);
    let compressed = match fs::read(&path) {
        Ok(compressed) => compressed,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let damage = if has_packs(repository) {
                Damage::Packed
            } else {
                Damage::Missing
            };
            return Err(damaged(repository, id, damage));
        }
        Err(error) => return Err(damaged(repository, id, Damage::Unreadable(error))),
    };
    let inflated =
        inflate(&compressed).ok_or_else(|| damaged(repository, id, Damage::Truncated))?;
    let header_end = inflated
        .iter()
        .position(|byte| *byte == 0)
        .ok_or_else(|| damaged(repository, id, Damage::Malformed("no object header")))?;
    let header = std::str::from_utf8(&inflated[..header_end]).map_err(|_| {
        damaged(
            repository,
            id,
            Damage::Malformed("object header is not text"),
        )
    })?;
    let (kind, length) = header.split_once(' ').ok_or_else(|| {
        damaged(
            repository,
            id,
            Damage::Malformed("object header has no length"),
        )
    })?;
    let body = inflated[header_end + 1..].to_vec();
    if length.parse::<usize>().ok() != Some(body.len()) {
        return Err(damaged(repository, id, Damage::Truncated));
    }
    Ok(Object {
        kind: kind.to_owned(),
        body,
    })
}

/// Reads `id` and requires it to be of `kind`.
pub(crate) fn read_kind(repository: &Path, id: &str, kind: &str) -> Result<Vec<u8>, Error> {
    let object = read(repository, id)?;
    if object.kind == kind {
        Ok(object.body)
    } else {
        Err(damaged(
            repository,
            id,
            Damage::Malformed("object of the wrong type"),
        ))
    }
}

/// What a commit's body says: its tree, first parent, committer time and summary.
struct CommitFields {
    tree: String,
    parent: Option<String>,
    time: i64,
    summary: String,
    message: String,
}

fn parse_commit(body: &[u8]) -> Option<CommitFields> {
    let text = std::str::from_utf8(body).ok()?;
    let (headers, message) = text.split_once("\n\n").unwrap_or((text, ""));
    let mut tree = None;
    let mut parent = None;
    let mut time = 0;
    for line in headers.lines() {
        if let Some(id) = line.strip_prefix("tree ") {
            tree = Some(id.to_owned());
        } else if let Some(id) = line.strip_prefix("parent ")
            && parent.is_none()
        {
            parent = Some(id.to_owned());
        } else if let Some(committer) = line.strip_prefix("committer ") {
            let mut fields = committer.rsplit(' ');
            let _zone = fields.next();
            time = fields.next()?.parse().ok()?;
        }
    }
    Some(CommitFields {
        tree: tree?,
        parent,
        time,
        summary: message.lines().next().unwrap_or_default().to_owned(),
        message: message.to_owned(),
    })
}

/// A tree's entries: (mode, name, id).
fn parse_tree(body: &[u8]) -> Option<Vec<(String, String, String)>> {
    let mut entries = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let space = rest.iter().position(|byte| *byte == b' ')?;
        let nul = rest.iter().position(|byte| *byte == 0)?;
        let mode = std::str::from_utf8(rest.get(..space)?).ok()?.to_owned();
        let name = std::str::from_utf8(rest.get(space + 1..nul)?)
            .ok()?
            .to_owned();
        let id = rest.get(nul + 1..nul + 21)?;
        entries.push((
            mode,
            name,
            id.iter().map(|byte| format!("{byte:02x}")).collect(),
        ));
        rest = &rest[nul + 21..];
    }
    Some(entries)
}

/// Every commit of the first-parent chain from `head`, newest first, each commit, tree and
/// blob inflated and checked. A missing or damaged object anywhere (a deleted middle commit
/// included) is an error naming it, never a shorter history.
pub(crate) fn chain(repository: &Path, head: &str) -> Result<Vec<ChainCommit>, Error> {
    let mut commits: Vec<ChainCommit> = Vec::new();
    let mut next = Some(head.to_owned());
    while let Some(id) = next {
        if commits.len() >= 1_000_000 {
            return Err(damaged(repository, &id, Damage::Malformed("endless chain")));
        }
        let body = read_kind(repository, &id, "commit")?;
        let fields = parse_commit(&body)
            .ok_or_else(|| damaged(repository, &id, Damage::Malformed("unparsable commit")))?;
        let tree_body = read_kind(repository, &fields.tree, "tree")?;
        let entries = parse_tree(&tree_body).ok_or_else(|| {
            damaged(
                repository,
                &fields.tree,
                Damage::Malformed("unparsable tree"),
            )
        })?;
        for (_mode, _name, blob) in &entries {
            read_kind(repository, blob, "blob")?;
        }
        next = fields.parent.clone();
        commits.push(ChainCommit {
            id,
            parent: fields.parent,
            time: fields.time,
            summary: fields.summary,
            message: fields.message,
            entries,
        });
    }
    Ok(commits)
}

/// Waits until the loose objects `ids` and their directories are on the disk, after reading
/// each back: an object the disk could not hold is an error here, whatever libgit2 said.
pub(crate) fn sync_objects(repository: &Path, ids: &[String]) -> Result<(), Error> {
    for id in ids {
        read(repository, id).map_err(|error| lost(repository, error))?;
        let path = loose_path(repository, id);
        crate::durable::sync_path(&path)?;
        if let Some(directory) = path.parent() {
            crate::durable::sync_path(directory)?;
        }
    }
    crate::durable::sync_path(&repository.join("objects"))
}

/// The error for an object that is not on the disk right after libgit2 reported it written:
/// a probe write beside it finds out why (on a full disk, the file system's own "No space left
/// on device").
fn lost(repository: &Path, error: Error) -> Error {
    let Error::HistoryDamaged { object, damage, .. } = error else {
        return error;
    };
    let probe = repository
        .join("objects")
        .join(format!(".space-probe-{}", std::process::id()));
    let written = fs::File::create(&probe).and_then(|mut file| {
        std::io::Write::write_all(&mut file, &[0; 4096])?;
        file.sync_all()
    });
    let _gone = fs::remove_file(&probe);
    let cause = match written {
        Err(error) => format!("writing to that directory fails: {error}; free space there and run the command again"),
        Ok(()) => "a probe write to that directory succeeds, so the cause is not known; run the command again".to_owned(),
    };
    Error::HistoryWriteLost {
        repository: repository.to_path_buf(),
        object,
        damage,
        cause,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every prefix of a valid stream is refused, promptly.
    #[test]
    fn truncated_streams_are_refused() {
        use std::io::Write;
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(b"blob 11\0hello world").unwrap();
        let whole = encoder.finish().unwrap();
        assert_eq!(inflate(&whole).unwrap(), b"blob 11\0hello world");
        for cut in 0..whole.len() {
            assert!(inflate(&whole[..cut]).is_none(), "cut at {cut}");
        }
    }
}
