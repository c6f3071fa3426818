//! `cargo xtask tidy`: house-style rules checked over every file of the workspace.
//!
//! The same checks run as the `workspace_is_tidy` test, so `cargo test` alone enforces them.
//! The rules are line-based heuristics, chosen to be simple and to have no false negatives
//! on the shapes the house style cares about; see each `check_*` function.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::CheckFailed;

mod docs;
mod size;

/// One house-style rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Every `.rs` file starts with a `//!` line saying what it is for.
    ModuleDoc,
    /// Tests assert today's behaviour instead of expecting a panic.
    ShouldPanic,
    /// An ignored test carries a FIXME on the same or the previous line.
    IgnoreWithoutFixme,
    /// No `utils`, `helpers`, `common` or `misc` modules.
    BannedModuleName,
    /// No trailing spaces or tabs in `.rs`, `.md` and `.toml` files.
    TrailingWhitespace,
    /// Library crates do not print; they return data and let binaries report.
    PrintInLibrary,
    /// Internal dependencies come from `[workspace.dependencies]`.
    InternalDependency,
    /// Every member inherits `[workspace.lints]`.
    WorkspaceLints,
    /// Every template in `templates/` is embedded by the generator, and every embedded
    /// template exists.
    TemplateReference,
    /// A source file holds at most 800 lines of non-test code, a function at most 120 lines
    /// unless a `// long: <why>` comment says why (`size.rs`).
    Size,
    /// `ARCHITECTURE.md` holds at most 25 000 bytes and `README.md` at most 12 000 (`docs.rs`).
    DocSize,
    /// Only the CLI's MCP files name the MCP SDK (`docs.rs`).
    SdkBoundary,
    /// A cited `research/NAME.md` is a file of `docs/research/` (`docs.rs`).
    Citation,
    /// A relative Markdown link names a file and heading that exist, and the map of `docs/`
    /// links every document of it (`docs.rs`).
    Link,
    /// The CLI and the executor read their environment only through documented constants,
    /// which `docs/environment.md` is generated from (`docs.rs`).
    UndocumentedVariable,
}

impl Rule {
    fn as_str(self) -> &'static str {
        match self {
            Rule::ModuleDoc => "module-doc",
            Rule::ShouldPanic => "should-panic",
            Rule::IgnoreWithoutFixme => "ignore-without-fixme",
            Rule::BannedModuleName => "banned-module-name",
            Rule::TrailingWhitespace => "trailing-whitespace",
            Rule::PrintInLibrary => "print-in-library",
            Rule::InternalDependency => "internal-dependency",
            Rule::WorkspaceLints => "workspace-lints",
            Rule::TemplateReference => "template-reference",
            Rule::Size => "size",
            Rule::DocSize => "doc-size",
            Rule::SdkBoundary => "sdk-boundary",
            Rule::Citation => "citation",
            Rule::Link => "link",
            Rule::UndocumentedVariable => "undocumented-variable",
        }
    }
}

/// Source directories of library crates, where printing is banned.
const LIBRARY_SOURCE_DIRS: &[&str] = &[
    "crates/executor/src",
    "crates/registry/src",
    "crates/generator/src",
];

/// The generator's file that embeds the templates.
const TEMPLATE_USER: &str = "crates/generator/src/render.rs";

/// Module names that become dumping grounds; give the code a concept name instead.
const BANNED_MODULE_NAMES: &[&str] = &["utils", "helpers", "common", "misc"];

/// Macros that write to the terminal.
const PRINT_MACROS: &[&str] = &["println", "eprintln", "print", "eprint", "dbg"];

/// One finding in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Finding {
    /// 1-based.
    line: usize,
    rule: Rule,
    message: String,
}

/// A finding located in the workspace.
#[derive(Debug)]
struct Violation {
    /// Relative to the workspace root, with `/` separators.
    path: String,
    finding: Finding,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Finding {
            line,
            rule,
            message,
        } = &self.finding;
        write!(f, "{}:{line}: [{}] {message}", self.path, rule.as_str())
    }
}

/// Checks the workspace at `root`, printing every violation as `path:line` on stderr.
pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    crate::registry_layers::run(root)?;
    let violations = check_workspace(root)?;
    for violation in &violations {
        eprintln!("{violation}");
    }
    if violations.is_empty() {
        eprintln!("tidy: ok");
        Ok(())
    } else {
        Err(CheckFailed(format!("tidy found {} violation(s)", violations.len())).into())
    }
}

fn check_workspace(root: &Path) -> anyhow::Result<Vec<Violation>> {
    let mut findings: Vec<Violation> = Vec::new();
    for path in workspace_files(root)? {
        let relative = relative_path(root, &path);
        if !has_extension(&relative, &["rs", "md", "toml"]) {
            continue;
        }
        let text = fs::read_to_string(&path)
            .with_context(|| format!("could not read `{}`", path.display()))?;
        for finding in check_file(&relative, &text) {
            findings.push(Violation {
                path: relative.clone(),
                finding,
            });
        }
        if has_extension(&relative, &["md"]) {
            for finding in docs::check_links(root, &relative, &text) {
                findings.push(Violation {
                    path: relative.clone(),
                    finding,
                });
            }
        }
        for (line, name) in docs::research_citations(&text) {
            if !root.join(docs::RESEARCH_DIR).join(&name).is_file() {
                findings.push(Violation {
                    path: relative.clone(),
                    finding: Finding {
                        line,
                        rule: Rule::Citation,
                        message: format!(
                            "cites research/{name}, which is not in {}",
                            docs::RESEARCH_DIR
                        ),
                    },
                });
            }
        }
    }
    for finding in docs::check_docs_map(root)
        .with_context(|| format!("could not read the map of docs/ in `{}`", root.display()))?
    {
        findings.push(Violation {
            path: "docs/README.md".to_owned(),
            finding,
        });
    }
    for member in workspace_members(root)? {
        let manifest = root.join(&member).join("Cargo.toml");
        let text = fs::read_to_string(&manifest)
            .with_context(|| format!("could not read `{}`", manifest.display()))?;
        for finding in check_manifest(&text) {
            findings.push(Violation {
                path: relative_path(root, &manifest),
                finding,
            });
        }
    }
    let templates_dir = root.join("templates");
    if templates_dir.is_dir() {
        let mut templates: Vec<String> = fs::read_dir(&templates_dir)
            .with_context(|| format!("could not list `{}`", templates_dir.display()))?
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect();
        templates.sort();
        let user = fs::read_to_string(root.join(TEMPLATE_USER))
            .with_context(|| format!("could not read `{TEMPLATE_USER}`"))?;
        for finding in check_templates(&templates, &user) {
            findings.push(Violation {
                path: TEMPLATE_USER.to_owned(),
                finding,
            });
        }
    }
    Ok(findings)
}

/// Compares the files of `templates/` with the `templates/NAME` references of `user`.
fn check_templates(templates: &[String], user: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    for template in templates {
        if !user.contains(&format!("templates/{template}\"")) {
            findings.push(Finding {
                line: 1,
                rule: Rule::TemplateReference,
                message: format!("`templates/{template}` is not embedded by the generator"),
            });
        }
    }
    for (index, line) in user.lines().enumerate() {
        let Some((_, rest)) = line.split_once("templates/") else {
            continue;
        };
        let Some((name, _)) = rest.split_once('"') else {
            continue;
        };
        if !templates.iter().any(|template| template == name) {
            findings.push(Finding {
                line: index + 1,
                rule: Rule::TemplateReference,
                message: format!("`templates/{name}` does not exist"),
            });
        }
    }
    findings
}

/// Every file below `root`, sorted, skipping `.git` and cargo target directories.
fn workspace_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            fs::read_dir(&dir).with_context(|| format!("could not list `{}`", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("could not list `{}`", dir.display()))?;
            let path = entry.path();
            // `file_type` does not follow symlinks, so a link cannot make the walk loop.
            let file_type = entry
                .file_type()
                .with_context(|| format!("could not stat `{}`", path.display()))?;
            if file_type.is_dir() {
                if !is_skipped_dir(&path) {
                    pending.push(path);
                }
            } else if file_type.is_file() {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// `.git`, and cargo target directories, which cargo marks with a `CACHEDIR.TAG` file.
fn is_skipped_dir(dir: &Path) -> bool {
    let name = dir.file_name().and_then(|name| name.to_str()).unwrap_or("");
    name == ".git" || name == "target" || dir.join("CACHEDIR.TAG").exists()
}

fn relative_path(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative
        .components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn has_extension(path: &str, extensions: &[&str]) -> bool {
    path.rsplit_once('.')
        .is_some_and(|(_, extension)| extensions.contains(&extension))
}

/// The member directories listed in the root manifest's `[workspace] members`,
/// with a trailing `/*` glob expanded to the subdirectories holding a `Cargo.toml`.
fn workspace_members(root: &Path) -> anyhow::Result<Vec<String>> {
    let manifest = root.join("Cargo.toml");
    let text = fs::read_to_string(&manifest)
        .with_context(|| format!("could not read `{}`", manifest.display()))?;
    let mut members = Vec::new();
    for pattern in parse_members(&text) {
        match pattern.strip_suffix("/*") {
            Some(parent) if !parent.contains('*') => {
                let entries = fs::read_dir(root.join(parent))
                    .with_context(|| format!("could not list workspace members in `{parent}`"))?;
                let mut expanded = Vec::new();
                for entry in entries {
                    let entry = entry.with_context(|| format!("could not list `{parent}`"))?;
                    if entry.path().join("Cargo.toml").is_file() {
                        expanded.push(format!("{parent}/{}", entry.file_name().to_string_lossy()));
                    }
                }
                expanded.sort();
                members.extend(expanded);
            }
            _ if pattern.contains('*') => {
                anyhow::bail!("tidy cannot expand the workspace member pattern `{pattern}`")
            }
            _ => members.push(pattern),
        }
    }
    Ok(members)
}

/// The strings of the `members = [..]` array in `[workspace]`, which may span lines.
fn parse_members(manifest: &str) -> Vec<String> {
    let mut section = String::new();
    let mut array: Option<String> = None;
    for line in manifest.lines() {
        let line = strip_comment(line).trim();
        if let Some(collected) = array.as_mut() {
            collected.push_str(line);
        } else if let Some(header) = table_header(line) {
            section = header.to_owned();
        } else if section == "workspace"
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "members"
        {
            array = Some(value.trim().to_owned());
        }
        if let Some(collected) = &array
            && collected.contains(']')
        {
            return quoted_strings(collected);
        }
    }
    array
        .map(|collected| quoted_strings(&collected))
        .unwrap_or_default()
}

fn quoted_strings(text: &str) -> Vec<String> {
    text.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The name of a `[table]` header line; `None` for other lines and for `[[array]]` headers.
fn table_header(line: &str) -> Option<&str> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    if inner.starts_with('[') {
        return None;
    }
    Some(inner.trim())
}

/// The line without a trailing `#` comment; a `#` inside a string is kept.
fn strip_comment(line: &str) -> &str {
    let mut in_string = None;
    for (index, character) in line.char_indices() {
        match (in_string, character) {
            (None, '"' | '\'') => in_string = Some(character),
            (Some(quote), _) if character == quote => in_string = None,
            (None, '#') => return &line[..index],
            _ => {}
        }
    }
    line
}

/// The per-file rules for one file, given its path relative to the workspace root.
fn check_file(path: &str, text: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    if has_extension(path, &["rs"]) {
        check_module_name(path, &mut findings);
        check_module_doc(text, &mut findings);
        check_test_attributes(text, &mut findings);
        size::check(path, text, &mut findings);
        if LIBRARY_SOURCE_DIRS
            .iter()
            .any(|dir| path.starts_with(&format!("{dir}/")))
        {
            check_no_print(text, &mut findings);
        }
    }
    if has_extension(path, &["rs", "md", "toml"]) {
        check_trailing_whitespace(text, &mut findings);
        docs::check(path, text, &mut findings);
    }
    findings.sort_by_key(|finding| finding.line);
    findings
}

/// `utils.rs`, and `utils/mod.rs` or any file below a `utils/` directory.
fn check_module_name(path: &str, findings: &mut Vec<Finding>) {
    let banned = path.split('/').find(|component| {
        let module = component.strip_suffix(".rs").unwrap_or(component);
        BANNED_MODULE_NAMES.contains(&module)
    });
    if let Some(component) = banned {
        findings.push(Finding {
            line: 1,
            rule: Rule::BannedModuleName,
            message: format!(
                "`{component}` is a dumping-ground name; name the module by its concept"
            ),
        });
    }
}

/// A `//!` line must appear in the leading block of blank and `//` comment lines
/// (after an optional shebang).
fn check_module_doc(text: &str, findings: &mut Vec<Finding>) {
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("//!") {
            return;
        }
        let is_shebang = index == 0 && line.starts_with("#!") && !line.starts_with("#![");
        if !(line.is_empty() || line.starts_with("//") || is_shebang) {
            break;
        }
    }
    findings.push(Finding {
        line: 1,
        rule: Rule::ModuleDoc,
        message: "the file does not start with a `//!` line saying what it is for".to_owned(),
    });
}

/// Only attribute lines (starting with `#[`) count, so strings that mention the
/// attributes, such as this module's own test inputs, do not.
fn check_test_attributes(text: &str, findings: &mut Vec<Finding>) {
    let mut previous = "";
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[") {
            if trimmed.contains("#[should_panic") {
                findings.push(Finding {
                    line: index + 1,
                    rule: Rule::ShouldPanic,
                    message: "`should_panic` test; assert the returned error instead".to_owned(),
                });
            }
            let ignores = ["#[ignore]", "#[ignore =", "#[ignore="]
                .iter()
                .any(|attribute| trimmed.contains(attribute));
            if ignores && !line.contains("FIXME") && !previous.contains("FIXME") {
                findings.push(Finding {
                    line: index + 1,
                    rule: Rule::IgnoreWithoutFixme,
                    message: "`ignore` without a FIXME on this or the previous line".to_owned(),
                });
            }
        }
        previous = line;
    }
}

/// Everything after a `#[cfg(test)]` line is treated as test code, and `//` comment
/// lines (doc examples included) are skipped.
fn check_no_print(text: &str, findings: &mut Vec<Finding>) {
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        if let Some(name) = print_macro_in(line) {
            findings.push(Finding {
                line: index + 1,
                rule: Rule::PrintInLibrary,
                message: format!(
                    "`{name}!` in a library crate; return the data or use `tracing` instead"
                ),
            });
        }
    }
}

/// The first print macro invoked on `line`: an identifier from [`PRINT_MACROS`]
/// directly followed by `!` (and not by `!=`).
fn print_macro_in(line: &str) -> Option<&'static str> {
    let bytes = line.as_bytes();
    let is_ident = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_';
    for (bang, _) in line.match_indices('!') {
        if bytes.get(bang + 1) == Some(&b'=') {
            continue;
        }
        let start = line[..bang]
            .bytes()
            .rposition(|byte| !is_ident(byte))
            .map_or(0, |position| position + 1);
        let name = &line[start..bang];
        if let Some(found) = PRINT_MACROS.iter().find(|&&candidate| candidate == name) {
            return Some(found);
        }
    }
    None
}

fn check_trailing_whitespace(text: &str, findings: &mut Vec<Finding>) {
    for (index, line) in text.lines().enumerate() {
        if line.ends_with([' ', '\t']) {
            findings.push(Finding {
                line: index + 1,
                rule: Rule::TrailingWhitespace,
                message: "trailing whitespace".to_owned(),
            });
        }
    }
}

/// A dependency seen in one dependency table of a member manifest.
struct Dependency {
    name: String,
    line: usize,
    internal: bool,
    from_workspace: bool,
}

/// A member manifest: internal dependencies use `workspace = true`, and `[lints]` is
/// inherited from the workspace.
///
/// A dependency is internal when its name is `toolsmith` or starts with `toolsmith-`,
/// or when it has a `path`.
fn check_manifest(text: &str) -> Vec<Finding> {
    let mut section = String::new();
    let mut dependencies: Vec<Dependency> = Vec::new();
    // Dotted keys (`name.workspace = true`, `name.features = [..]`) merge into one
    // dependency only within the table they appear in.
    let mut section_start = 0;
    let mut inherits_lints = false;
    for (index, line) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = strip_comment(line).trim();
        if let Some(header) = table_header(line) {
            section = header.to_owned();
            section_start = dependencies.len();
            if let Some(name) = dependency_subtable(&section) {
                dependencies.push(Dependency {
                    name: name.to_owned(),
                    line: line_number,
                    internal: is_internal_name(name),
                    from_workspace: false,
                });
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let compact_value: String = value.split_whitespace().collect();
        if dependency_subtable(&section).is_some() {
            let dependency = dependencies
                .last_mut()
                .expect("invariant: a dependency sub-table header pushed its dependency");
            dependency.internal |= key == "path";
            dependency.from_workspace |= key == "workspace" && compact_value == "true";
        } else if is_dependency_table(&section) {
            let (name, dotted_key) = match key.split_once('.') {
                Some((name, dotted_key)) => (name.trim(), Some(dotted_key.trim())),
                None => (key, None),
            };
            let internal = is_internal_name(name)
                || dotted_key == Some("path")
                || (dotted_key.is_none() && compact_value.contains("path="));
            let from_workspace = match dotted_key {
                Some(dotted_key) => dotted_key == "workspace" && compact_value == "true",
                None => compact_value.contains("workspace=true"),
            };
            let earlier = dependencies[section_start..]
                .iter_mut()
                .find(|dependency| dependency.name == name);
            match earlier {
                Some(dependency) => {
                    dependency.internal |= internal;
                    dependency.from_workspace |= from_workspace;
                }
                None => dependencies.push(Dependency {
                    name: name.to_owned(),
                    line: line_number,
                    internal,
                    from_workspace,
                }),
            }
        } else if (section == "lints" && key == "workspace")
            || (section.is_empty() && key == "lints.workspace")
        {
            inherits_lints = compact_value == "true";
        }
    }
    let mut findings: Vec<Finding> = dependencies
        .into_iter()
        .filter(|dependency| dependency.internal && !dependency.from_workspace)
        .map(|dependency| Finding {
            line: dependency.line,
            rule: Rule::InternalDependency,
            message: format!(
                "internal dependency `{}` must use `workspace = true` (declare it in the root `[workspace.dependencies]`)",
                dependency.name
            ),
        })
        .collect();
    if !inherits_lints {
        findings.push(Finding {
            line: 1,
            rule: Rule::WorkspaceLints,
            message: "missing `[lints]` with `workspace = true`".to_owned(),
        });
    }
    findings.sort_by_key(|finding| finding.line);
    findings
}

fn is_internal_name(name: &str) -> bool {
    name == "toolsmith" || name.starts_with("toolsmith-")
}

/// `dependencies`, `dev-dependencies`, `build-dependencies`, also under `target.'cfg'.`.
fn is_dependency_table(section: &str) -> bool {
    let last = section.rsplit('.').next().unwrap_or(section);
    ["dependencies", "dev-dependencies", "build-dependencies"].contains(&last)
        && !section.starts_with("workspace")
}

/// The dependency name of a `[dependencies.NAME]` header.
fn dependency_subtable(section: &str) -> Option<&str> {
    let (table, name) = section.rsplit_once('.')?;
    is_dependency_table(table).then_some(name.trim())
}

#[cfg(test)]
mod tests {
    use crate::tidy::{
        Finding, check_file, check_manifest, check_templates, check_workspace, parse_members,
    };

    fn render(findings: &[Finding]) -> Vec<String> {
        findings
            .iter()
            .map(|finding| format!("{}: {}", finding.line, finding.rule.as_str()))
            .collect()
    }

    /// Runs the per-file rules on `text` as if it were the file at `path`.
    pub(super) fn check(path: &str, text: &str, expect: &[&str]) {
        assert_eq!(
            render(&check_file(path, text)),
            expect,
            "path: {path}\n{text}"
        );
    }

    fn check_toml(text: &str, expect: &[&str]) {
        assert_eq!(render(&check_manifest(text)), expect, "{text}");
    }

    /// The tidy rules hold on the whole workspace, so `cargo test` alone enforces them.
    #[test]
    fn workspace_is_tidy() {
        let violations = check_workspace(&crate::project_root()).unwrap();
        let violations: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert!(
            violations.is_empty(),
            "tidy violations:\n{}",
            violations.join("\n")
        );
    }

    #[test]
    fn module_doc() {
        check("src/a.rs", "//! What a is for.\nfn a() {}\n", &[]);
        check(
            "src/a.rs",
            "// Licensed under MIT.\n\n//! What a is for.\n",
            &[],
        );
        check(
            "src/a.rs",
            "#!/usr/bin/env run-cargo-script\n//! A script.\n",
            &[],
        );
        check("src/a.rs", "fn a() {}\n//! Too late.\n", &["1: module-doc"]);
        check(
            "src/a.rs",
            "/// An item doc.\nfn a() {}\n",
            &["1: module-doc"],
        );
        check(
            "src/a.rs",
            "#![deny(warnings)]\n//! After an attribute.\n",
            &["1: module-doc"],
        );
        check("src/a.rs", "", &["1: module-doc"]);
        check("docs/a.md", "no doc needed\n", &[]);
    }

    #[test]
    fn should_panic() {
        check(
            "src/a.rs",
            "//! a\n#[test]\n#[should_panic]\nfn f() {}\n",
            &["3: should-panic"],
        );
        check(
            "src/a.rs",
            "//! a\n    #[should_panic(expected = \"x\")]\n",
            &["2: should-panic"],
        );
        check(
            "src/a.rs",
            "//! a\nconst NAME: &str = \"#[should_panic]\";\n",
            &[],
        );
    }

    #[test]
    fn ignore_needs_fixme() {
        check(
            "src/a.rs",
            "//! a\n#[test]\n#[ignore]\nfn f() {}\n",
            &["3: ignore-without-fixme"],
        );
        check(
            "src/a.rs",
            "//! a\n#[ignore = \"slow\"]\n",
            &["2: ignore-without-fixme"],
        );
        check(
            "src/a.rs",
            "//! a\n#[test] #[ignore]\n",
            &["2: ignore-without-fixme"],
        );
        check(
            "src/a.rs",
            "//! a\n// FIXME(#12): flaky on CI.\n#[ignore]\n",
            &[],
        );
        check("src/a.rs", "//! a\n#[ignore] // FIXME(#12): flaky.\n", &[]);
        check(
            "src/a.rs",
            "//! a\n// FIXME: far away.\n\n#[ignore]\n",
            &["4: ignore-without-fixme"],
        );
        check("src/a.rs", "//! a\n#[cfg_attr(miri, ignore)]\n", &[]);
    }

    #[test]
    fn banned_module_names() {
        check(
            "crates/x/src/utils.rs",
            "//! a\n",
            &["1: banned-module-name"],
        );
        check(
            "crates/x/src/helpers/mod.rs",
            "//! a\n",
            &["1: banned-module-name"],
        );
        check("tests/common/mod.rs", "//! a\n", &["1: banned-module-name"]);
        check(
            "crates/x/src/misc.rs",
            "//! a\n",
            &["1: banned-module-name"],
        );
        check("crates/x/src/commons.rs", "//! a\n", &[]);
        check("docs/utils.md", "fine\n", &[]);
    }

    #[test]
    fn trailing_whitespace() {
        check(
            "src/a.rs",
            "//! a \nfn f() {}\t\n",
            &["1: trailing-whitespace", "2: trailing-whitespace"],
        );
        check("README.md", "line  \nok\n", &["1: trailing-whitespace"]);
        check("Cargo.toml", "[package] \n", &["1: trailing-whitespace"]);
        check(".ci/notes.txt", "free form  \n", &[]);
        check("src/a.rs", "//! a\r\n", &[]);
    }

    #[test]
    fn print_in_library_crates() {
        let code = "//! a\nfn f() {\n    println!(\"x\");\n    std::eprint!(\"y\");\n    let z = dbg!(1);\n}\n";
        check(
            "crates/executor/src/spawn.rs",
            code,
            &[
                "3: print-in-library",
                "4: print-in-library",
                "5: print-in-library",
            ],
        );
        check(
            "crates/registry/src/lib.rs",
            code,
            &[
                "3: print-in-library",
                "4: print-in-library",
                "5: print-in-library",
            ],
        );
        check("crates/cli/src/lib.rs", code, &[]);
        check("crates/executor/tests/run.rs", code, &[]);
        check("xtask/src/main.rs", code, &[]);
    }

    #[test]
    fn print_heuristics() {
        let library = "crates/executor/src/a.rs";
        check(
            library,
            "//! a\n/// println!(\"in a doc example\");\n// eprintln!(\"in a comment\");\n",
            &[],
        );
        check(
            library,
            "//! a\nfn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { println!(\"ok in tests\"); }\n}\n",
            &[],
        );
        check(
            library,
            "//! a\nlet reprint = my_println!(x);\nlet same = a != b;\n",
            &[],
        );
        check(
            library,
            "//! a\nwrite!(f, \"x\")?;\nformat!(\"println\");\n",
            &[],
        );
    }

    #[test]
    fn manifest_internal_dependencies() {
        let lints = "\n[lints]\nworkspace = true\n";
        check_toml(
            &format!(
                "[dependencies]\ntoolsmith-executor.workspace = true\nanyhow = \"1\"\n{lints}"
            ),
            &[],
        );
        check_toml(
            &format!(
                "[dependencies]\ntoolsmith = {{ workspace = true, features = [\"x\"] }}\n{lints}"
            ),
            &[],
        );
        check_toml(
            &format!("[dependencies]\ntoolsmith-executor = {{ path = \"../executor\" }}\n{lints}"),
            &["2: internal-dependency"],
        );
        check_toml(
            &format!("[dev-dependencies]\ntoolsmith-registry = \"0.1\"\n{lints}"),
            &["2: internal-dependency"],
        );
        check_toml(
            &format!("[build-dependencies]\nshared = {{ path = \"../shared\" }}\n{lints}"),
            &["2: internal-dependency"],
        );
        check_toml(
            &format!(
                "[target.'cfg(unix)'.dependencies]\ntoolsmith-executor = {{ version = \"0.1\" }}\n{lints}"
            ),
            &["2: internal-dependency"],
        );
        check_toml(
            &format!(
                "[dependencies]\ntoolsmith-executor.workspace = true\ntoolsmith-executor.features = [\"x\"]\n{lints}"
            ),
            &[],
        );
        check_toml(
            &format!("[dependencies]\ntoolsmith-executor.path = \"../executor\"\n{lints}"),
            &["2: internal-dependency"],
        );
        check_toml(
            &format!("[dependencies.toolsmith-registry]\nworkspace = true\n{lints}"),
            &[],
        );
        check_toml(
            &format!("[dependencies.toolsmith-registry]\npath = \"../registry\"\n{lints}"),
            &["1: internal-dependency"],
        );
        check_toml(
            &format!(
                "[workspace.dependencies]\ntoolsmith-executor = {{ path = \"crates/executor\" }}\n{lints}"
            ),
            &[],
        );
    }

    #[test]
    fn manifest_workspace_lints() {
        check_toml("[package]\nname = \"x\"\n", &["1: workspace-lints"]);
        check_toml(
            "[package]\nname = \"x\"\n[lints]\nworkspace = false\n",
            &["1: workspace-lints"],
        );
        check_toml(
            "[package]\nname = \"x\"\n[lints]\nworkspace = true # inherit\n",
            &[],
        );
        check_toml("lints.workspace = true\n[package]\nname = \"x\"\n", &[]);
        check_toml(
            "[package]\nname = \"x\"\n[package.metadata]\nworkspace = true\n",
            &["1: workspace-lints"],
        );
    }

    #[test]
    fn members() {
        let manifest = "[workspace]\nresolver = \"3\"\nmembers = [\n  \"crates/a\", # the a crate\n  \"xtask\",\n]\n[workspace.package]\nmembers = [\"no\"]\n";
        assert_eq!(parse_members(manifest), ["crates/a", "xtask"]);
        assert_eq!(
            parse_members("[workspace]\nmembers = [\"a\", \"b\"]\n"),
            ["a", "b"]
        );
        assert!(parse_members("[package]\nname = \"x\"\n").is_empty());
    }

    #[test]
    fn templates_and_their_references_match() {
        let templates = vec!["a.tera".to_owned(), "b.tera".to_owned()];
        let user = "include_str!(\"../../../templates/a.tera\")\ninclude_str!(\"../../../templates/c.tera\")\n";
        let messages: Vec<String> = check_templates(&templates, user)
            .into_iter()
            .map(|finding| format!("{}: {}", finding.line, finding.message))
            .collect();
        assert_eq!(
            messages,
            [
                "1: `templates/b.tera` is not embedded by the generator",
                "2: `templates/c.tera` does not exist"
            ]
        );
    }
}
