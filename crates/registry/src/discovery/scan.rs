//! Scanning tool directories: which files are candidates, with the name and [`Format`] their
//! file name gives them (a manifest's name is its frontmatter's `name`, as in Nanocoder).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::discovery::cache::Fingerprint;
use crate::discovery::catalog::{Problem, ProblemError};
use crate::discovery::discover::{Candidate, problem_concerns};
use crate::discovery::layers::{LayerDir, tool_dirs};
use crate::formats::format::Format;
use crate::formats::manifest;
use crate::layer::Layer;
use crate::name::ToolName;
use crate::overrides::RunConfig;
use crate::regular_file::{Links, MAX_TOOL_FILE_BYTES, read_regular, read_start, special_kind};

/// The candidates and problems of `layers` (relative directories taken from `config.cwd`),
/// only those concerning `only` when it is given.
pub(crate) fn scan_dirs(
    layers: &[LayerDir],
    only: Option<&ToolName>,
    config: &RunConfig,
) -> (Vec<Candidate>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut candidates = Vec::new();
    // Asked once per scan, at the first project layer: the verdict reads the trust store and
    // the project config, and every project layer shares it.
    let mut project_verdict = None;
    for layer_dir in layers {
        let layer = layer_dir.layer;
        let root = config.cwd.join(&layer_dir.dir);
        if let Some(gate) = &config.project_gate
            && layer.in_project()
            && let Err(distrust) = project_verdict.get_or_insert_with(|| gate.check())
        {
            tracing::warn!(
                "skipped the project layer {}: {distrust}; run `toolsmith trust {}` to use it",
                root.display(),
                gate.dir().display()
            );
            problems.push(Problem {
                path: root,
                error: ProblemError::UntrustedLayer {
                    distrust: distrust.clone(),
                },
            });
            continue;
        }
        // A bundles directory is checked before it is listed, then each bundle's folder.
        if layer.holds_bundles() && project_layer_through_link(&root, layer, config) {
            problems.push(Problem {
                path: root,
                error: ProblemError::LinkedLayer,
            });
            continue;
        }
        match tool_dirs(layer_dir, &config.cwd) {
            Ok(dirs) => {
                for dir in dirs {
                    scan_dir(&dir, layer, config, &mut candidates, &mut problems);
                }
            }
            Err(source) => problems.push(Problem {
                path: root,
                error: ProblemError::ReadDir { source },
            }),
        }
    }
    if let Some(only) = only {
        candidates.retain(|candidate| &candidate.expected == only);
        problems.retain(|problem| problem_concerns(problem, only));
    }
    (candidates, problems)
}

/// Whether `dir`, a layer of the project (`<project>/.toolsmith/tools`,
/// `<project>/.kodelet/tools`, ...), is reached through a symbolic link: the directory itself
/// or its parent inside the project. Whoever writes the project (a clone, a tool under
/// `filesystem = "project"` that plants `.toolsmith -> ~/.config/toolsmith`) must not make
/// toolsmith read, with the project's trust, a directory that is not the project's. Checked
/// each time the layer is read, so a link planted while `serve` runs is refused too. A bundle's
/// folder (`.nanocoder/skills/<skill>/tools`) is checked with its bundle, after the bundles
/// directory and its parent were: every directory between the project and the tools.
fn project_layer_through_link(dir: &Path, layer: Layer, config: &RunConfig) -> bool {
    if !layer.in_project() {
        return false;
    }
    let is_link = |path: &Path| {
        fs::symlink_metadata(path).is_ok_and(|metadata| metadata.file_type().is_symlink())
    };
    is_link(dir)
        || dir
            .parent()
            .filter(|parent| *parent != config.project_dir)
            .is_some_and(is_link)
}

/// Adds the candidates of `dir` in sorted file-name order.
fn scan_dir(
    dir: &Path,
    layer: Layer,
    config: &RunConfig,
    candidates: &mut Vec<Candidate>,
    problems: &mut Vec<Problem>,
) {
    if project_layer_through_link(dir, layer, config) {
        problems.push(Problem {
            path: dir.to_path_buf(),
            error: ProblemError::LinkedLayer,
        });
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(source) if source.kind() == io::ErrorKind::NotFound && !layer.missing_is_problem() => {
            return;
        }
        Err(source) => {
            problems.push(Problem {
                path: dir.to_path_buf(),
                error: ProblemError::ReadDir { source },
            });
            return;
        }
    };
    let mut paths = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => paths.push(entry.path()),
            Err(source) => problems.push(Problem {
                path: dir.to_path_buf(),
                error: ProblemError::ReadDir { source },
            }),
        }
    }
    paths.sort();

    let mut winners: HashMap<ToolName, PathBuf> = HashMap::new();
    for path in paths {
        match classify(&path) {
            Ok(Some(Classified {
                name: expected,
                format,
                fingerprint,
            })) => {
                if let Some(winner) = winners.get(&expected) {
                    problems.push(Problem {
                        error: ProblemError::Duplicate {
                            name: expected,
                            winner: winner.clone(),
                        },
                        path,
                    });
                    continue;
                }
                winners.insert(expected.clone(), path.clone());
                candidates.push(Candidate {
                    path,
                    source: dir.to_path_buf(),
                    layer,
                    expected,
                    format,
                    fingerprint,
                });
            }
            Ok(None) => {}
            Err(error) => problems.push(Problem { path, error }),
        }
    }
}

/// What [`classify`] tells of a candidate file.
#[derive(Debug)]
pub(crate) struct Classified {
    pub(crate) name: ToolName,
    pub(crate) format: Format,
    pub(crate) fingerprint: Fingerprint,
}

/// The tool name, format and fingerprint of `path` if it is a candidate, `None` if it is
/// silently skipped.
pub(crate) fn classify(path: &Path) -> Result<Option<Classified>, ProblemError> {
    let Some(file_name) = path.file_name() else {
        return Ok(None);
    };
    if file_name.as_encoded_bytes().starts_with(b".") || is_documentation(file_name) {
        return Ok(None);
    }
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(source) => {
            let is_link = fs::symlink_metadata(path)
                .map(|link| link.file_type().is_symlink())
                .unwrap_or(false);
            return Err(if is_link {
                ProblemError::BrokenLink { source }
            } else {
                ProblemError::Metadata { source }
            });
        }
    };
    if metadata.is_dir() {
        return Ok(None);
    }
    // A FIFO would block whoever opens it and a device may never end: they are reported,
    // never opened (the `stat` above does neither).
    if let Some(kind) = special_kind(&metadata.file_type()) {
        return Err(ProblemError::NotRegular { kind });
    }
    let is_manifest = file_name
        .as_encoded_bytes()
        .ends_with(manifest::model::FILE_SUFFIX.as_bytes());
    if !is_manifest && metadata.permissions().mode() & 0o111 == 0 {
        // A script someone forgot to make executable is the commonest reason a tool does not
        // show up; any other file without the execute bit (notes, data) is not a tool.
        return if starts_with_shebang(path) {
            Err(ProblemError::NotExecutable)
        } else {
            Ok(None)
        };
    }
    let file_name = file_name.to_str().ok_or(ProblemError::NonUtf8FileName)?;
    // Nanocoder keys a tool by its frontmatter's `name`, whatever the file is called; a
    // manifest without a readable name is filed under its file name, and loading it reports
    // why.
    if is_manifest && let Some(name) = manifest_name(path) {
        return Ok(Some(Classified {
            name,
            format: Format::Manifest,
            fingerprint: Fingerprint::of(&metadata),
        }));
    }
    let (name, format) =
        Format::of_file(file_name).map_err(|source| ProblemError::FileName { source })?;
    Ok(Some(Classified {
        name,
        format,
        fingerprint: Fingerprint::of(&metadata),
    }))
}

/// The name the manifest at `path` declares in its frontmatter, if it can be read and is valid.
fn manifest_name(path: &Path) -> Option<ToolName> {
    let contents = read_regular(path, Links::Follow, MAX_TOOL_FILE_BYTES).ok()?;
    manifest::frontmatter::declared_name(std::str::from_utf8(&contents).ok()?)
}

/// True when the file at `path` starts with `#!`.
fn starts_with_shebang(path: &Path) -> bool {
    read_start(path, Links::Follow, 2).is_ok_and(|start| start == b"#!")
}

/// True for the documentation files people keep next to their tools
/// (`README.md`, `CHANGELOG.md`, ...): markdown, but not manifests, and never
/// worth a problem report. Any other `.md` file whose name is not a valid
/// tool name is still reported, so a misnamed manifest is not silently lost.
fn is_documentation(file_name: &std::ffi::OsStr) -> bool {
    const DOCUMENTATION: [&str; 5] = ["README", "CHANGELOG", "LICENSE", "CONTRIBUTING", "NOTES"];
    file_name.to_str().is_some_and(|file_name| {
        file_name
            .strip_suffix(manifest::model::FILE_SUFFIX)
            .is_some_and(|stem| {
                DOCUMENTATION
                    .iter()
                    .any(|doc| stem.eq_ignore_ascii_case(doc))
            })
    })
}
