//! The rules that keep what the docs and the code map say true: the size of the two entry documents, research citations that resolve, and the one place that knows the MCP SDK.

use std::path::Path;

use crate::tidy::{Finding, Rule};

/// The map of `docs/`, which links every document of it.
const DOCS_MAP: &str = "docs/README.md";

/// The entry documents and the most bytes each may hold: a newcomer reads them whole, and
/// the reference lives once in `docs/`.
const DOC_BUDGETS: &[(&str, usize)] = &[("ARCHITECTURE.md", 25_000), ("README.md", 12_000)];

/// The research notes cited by the code and docs as `research/NAME.md` live in this
/// directory of the repository.
pub(super) const RESEARCH_DIR: &str = "docs/research";

/// Where the research notes lived before they were kept in the repository; a citation of it
/// does not resolve for anyone with only the repository. (Spelt in two parts so that this file
/// does not cite it.)
const OUTSIDE_RESEARCH: &str = concat!("shared", "/research/");

/// The files of the CLI that may name the MCP SDK (`rmcp`): the `mcp` module, the HTTP front
/// that hosts its Streamable HTTP service (and reads its session header), and `export.rs`,
/// whose `mcp_tool` builds the one MCP definition of a tool for `tools/list` and
/// `export --format mcp`. Every other file of `crates/` goes through these.
const SDK_FILES: &[&str] = &[
    "crates/cli/src/mcp.rs",
    "crates/cli/src/mcp/",
    "crates/cli/src/http.rs",
    "crates/cli/src/export.rs",
];

/// The sources whose environment reads must name a documented constant (`EnvVars`, the
/// executor's `*_VAR`s), so that `docs/environment.md`, generated from those, lists them all.
const ENVIRONMENT_READERS: &[&str] = &["crates/cli/src/", "crates/executor/src/"];

/// The calls that read a variable of toolsmith's own environment by name.
const ENVIRONMENT_READS: &[&str] = &["env::var(\"", "env::var_os(\"", "lookup(\""];

/// The per-file rules of this module for the file at `path` (relative to the workspace root).
pub(super) fn check(path: &str, text: &str, findings: &mut Vec<Finding>) {
    if path.ends_with(".rs") && ENVIRONMENT_READERS.iter().any(|dir| path.starts_with(dir)) {
        check_environment_reads(text, findings);
    }
    for (document, budget) in DOC_BUDGETS {
        if path == *document && text.len() > *budget {
            findings.push(Finding {
                line: 1,
                rule: Rule::DocSize,
                message: format!(
                    "{} bytes, more than {budget}: move the reference to docs/ and link it",
                    text.len()
                ),
            });
        }
    }
    if path.starts_with("crates/") && path.ends_with(".rs") && !is_sdk_file(path) {
        for (index, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("rmcp::") || code.trim_start().starts_with("use rmcp") {
                findings.push(Finding {
                    line: index + 1,
                    rule: Rule::SdkBoundary,
                    message: format!(
                        "the MCP SDK is named only in {}: go through them",
                        SDK_FILES.join(", ")
                    ),
                });
            }
        }
    }
    for (index, line) in text.lines().enumerate() {
        if line.contains(OUTSIDE_RESEARCH) {
            findings.push(Finding {
                line: index + 1,
                rule: Rule::Citation,
                message: format!(
                    "a research note outside the repository: cite the copy in {RESEARCH_DIR}"
                ),
            });
        }
    }
}

/// A variable read by a string literal is one `docs/environment.md` cannot list; test code
/// (after `#[cfg(test)]`) and comments may.
fn check_environment_reads(text: &str, findings: &mut Vec<Finding>) {
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            return;
        }
        let code = line.split("//").next().unwrap_or("");
        if ENVIRONMENT_READS.iter().any(|read| code.contains(read)) {
            findings.push(Finding {
                line: index + 1,
                rule: Rule::UndocumentedVariable,
                message: "a variable read by its literal name: declare it on `EnvVars` (or as an executor `*_VAR`) with a doc comment, then run `cargo xtask codegen`".to_owned(),
            });
        }
    }
}

fn is_sdk_file(path: &str) -> bool {
    SDK_FILES.iter().any(|allowed| {
        if allowed.ends_with('/') {
            path.starts_with(allowed)
        } else {
            path == *allowed
        }
    })
}

/// Every `research/<name>.md` that `text` cites, with its 1-based line (a note's name is
/// lowercase).
pub(super) fn research_citations(text: &str) -> Vec<(usize, String)> {
    let mut cited = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("research/") {
            let after = &rest[start + "research/".len()..];
            let name: String = after
                .chars()
                .take_while(|character| {
                    character.is_ascii_alphanumeric() || matches!(character, '-' | '_' | '.')
                })
                .collect();
            if let Some(stem) = name.strip_suffix(".md")
                && stem.starts_with(|first: char| first.is_ascii_lowercase())
            {
                cited.push((index + 1, name.clone()));
            }
            rest = &after[name.len()..];
        }
    }
    cited
}

/// The relative links of the Markdown file at `path` (relative to `root`) whose file or
/// heading does not exist: a section moved to another document breaks its links here first.
pub(super) fn check_links(root: &Path, path: &str, text: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let dir = Path::new(path).parent().unwrap_or(Path::new(""));
    let mut in_code_block = false;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
            continue;
        }
        if in_code_block {
            continue;
        }
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() {
                root.join(path)
            } else {
                root.join(dir).join(file)
            };
            let message = if !resolved.exists() {
                Some(format!("links to {target}, which does not exist"))
            } else if let Some(anchor) = anchor
                && resolved
                    .extension()
                    .is_some_and(|extension| extension == "md")
            {
                let target_text = std::fs::read_to_string(&resolved).unwrap_or_default();
                (!heading_anchors(&target_text)
                    .iter()
                    .any(|known| known == anchor))
                .then(|| format!("links to {target}, a heading that does not exist"))
            } else {
                None
            };
            if let Some(message) = message {
                findings.push(Finding {
                    line: index + 1,
                    rule: Rule::Link,
                    message,
                });
            }
        }
    }
    findings
}

/// The targets of the inline links `[text](target)` of one line.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find("](") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else {
            break;
        };
        let target = &after[..end];
        if !target.is_empty() && !target.contains(' ') {
            targets.push(target.to_owned());
        }
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchors of the headings of a Markdown text.
fn heading_anchors(text: &str) -> Vec<String> {
    let mut anchors = Vec::new();
    let mut in_code_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code_block = !in_code_block;
            continue;
        }
        if in_code_block || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        anchors.push(
            title
                .chars()
                .filter_map(|character| match character {
                    ' ' => Some('-'),
                    '-' | '_' => Some(character),
                    _ if character.is_alphanumeric() => Some(character.to_ascii_lowercase()),
                    _ => None,
                })
                .collect::<String>()
                .to_lowercase(),
        );
    }
    anchors
}

/// The documents of `docs/` (and `docs/research/`) that the map does not link.
pub(super) fn check_docs_map(root: &Path) -> std::io::Result<Vec<Finding>> {
    let map = std::fs::read_to_string(root.join(DOCS_MAP))?;
    let linked: Vec<String> = map.lines().flat_map(link_targets).collect();
    let mut findings = Vec::new();
    for dir in ["docs", RESEARCH_DIR] {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))?
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().into_string().ok())
            .filter(|name| name.ends_with(".md") && name != "README.md")
            .collect();
        names.sort();
        for name in names {
            let relative = Path::new(dir)
                .strip_prefix("docs")
                .unwrap_or(Path::new(""))
                .join(&name);
            let relative = relative.to_string_lossy();
            if !linked
                .iter()
                .any(|target| target.split('#').next() == Some(&*relative))
            {
                findings.push(Finding {
                    line: 1,
                    rule: Rule::Link,
                    message: format!("the map of docs/ does not link {dir}/{name}"),
                });
            }
        }
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use crate::tidy::docs::{OUTSIDE_RESEARCH, heading_anchors, link_targets, research_citations};
    use crate::tidy::tests::check;

    #[test]
    fn entry_documents_have_a_budget() {
        check("ARCHITECTURE.md", &"a\n".repeat(12_500), &[]);
        check("ARCHITECTURE.md", &"a\n".repeat(12_501), &["1: doc-size"]);
        check("README.md", &"a\n".repeat(6_001), &["1: doc-size"]);
        check("docs/README.md", &"a\n".repeat(20_000), &[]);
    }

    #[test]
    fn only_the_mcp_files_name_the_sdk() {
        check(
            "crates/cli/src/run.rs",
            "//! a\nuse rmcp::model::Tool;\nfn f() -> rmcp::model::Tool {}\n",
            &["2: sdk-boundary", "3: sdk-boundary"],
        );
        check(
            "crates/cli/src/run.rs",
            "//! a\n// rmcp::model::Tool is mapped elsewhere.\n",
            &[],
        );
        check(
            "crates/cli/src/mcp/results.rs",
            "//! a\nuse rmcp::model::Tool;\n",
            &[],
        );
        check(
            "crates/cli/src/export.rs",
            "//! a\nuse rmcp::model::Tool;\n",
            &[],
        );
        check(
            "crates/registry/src/mcp.rs",
            "//! a\nuse rmcp::model::Tool;\n",
            &["2: sdk-boundary"],
        );
        check("tests/serve.rs", "//! a\nuse rmcp::ServiceExt;\n", &[]);
    }

    #[test]
    fn research_is_cited_inside_the_repository() {
        check(
            "docs/executor.md",
            &format!("see `{OUTSIDE_RESEARCH}isolation.md`\n"),
            &["1: citation"],
        );
        assert_eq!(
            research_citations(
                "//! `research/isolation.md` §7 and research/mcp.md, research/ alone, research/NAME.md\n"
            ),
            [(1, "isolation.md".to_owned()), (1, "mcp.md".to_owned())]
        );
    }

    #[test]
    fn links_and_anchors() {
        assert_eq!(
            link_targets("see [a](b.md#c), [x](https://e.org) and `[n](m)` [t](with space)"),
            ["b.md#c", "https://e.org", "m"]
        );
        assert_eq!(
            heading_anchors(
                "# Title\n## Tools with dependencies (`toolsmith prepare`) and tool caches\n```sh\n# comment\n```\n### `[tools.NAME]`\n"
            ),
            [
                "title",
                "tools-with-dependencies-toolsmith-prepare-and-tool-caches",
                "toolsname"
            ]
        );
    }

    #[test]
    fn variables_are_read_through_their_documented_constants() {
        check(
            "crates/cli/src/output.rs",
            "//! a\nfn f() { lookup(\"TERM\"); std::env::var(\"HOME\"); lookup(EnvVars::TERM); }\n#[cfg(test)]\nmod tests { fn g() { lookup(\"TERM\"); } }\n",
            &["2: undocumented-variable"],
        );
        check(
            "crates/executor/src/features.rs",
            "//! a\nfn f() { std::env::var_os(\"X\"); std::env::var(DISABLE_FEATURES_VAR); }\n",
            &["2: undocumented-variable"],
        );
        check(
            "crates/registry/src/call/prepare.rs",
            "//! a\nfn f() { lookup(\"UV_INDEX_URL\"); }\n",
            &[],
        );
    }
}
