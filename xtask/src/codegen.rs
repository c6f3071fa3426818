//! `cargo xtask codegen [--check]`: the generated files of the workspace, written from their sources, or checked to be fresh.
//!
//! - `docs/config.md`, the reference of the config file, rendered from the JSON Schema that
//!   `toolsmith_cli::config_schema()` derives from the structs the file is parsed into
//!   (schemars), so the reference cannot drift from the parser: a section is a property of the
//!   root whose schema is a documented struct (or a map of one, for `[tools.NAME]`), and its
//!   keys are that struct's properties, each with its doc comment.
//! - `docs/environment.md`, every environment variable toolsmith reads, rendered from the doc
//!   comments of the CLI's `EnvVars` and the executor's `*_VAR` constants (`environment.rs`).
//!
//! `cargo xtask ci` runs the check mode, and so does the test `generated_files_are_fresh`, so
//! `cargo test` alone fails on a stale file.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use crate::CheckFailed;
use crate::codegen::environment::ENVIRONMENT_REFERENCE;

mod environment;

/// The config reference, relative to the workspace root.
const CONFIG_REFERENCE: &str = "docs/config.md";

/// The command that rewrites every generated file.
const REFRESH: &str = "cargo xtask codegen";

/// Writes every generated file, or with `check` fails naming each stale one.
pub(crate) fn run(root: &Path, check: bool) -> anyhow::Result<()> {
    let config = render_config_reference(&toolsmith_cli::config_schema())
        .map_err(|message| anyhow::anyhow!("cannot render {CONFIG_REFERENCE}: {message}"))?;
    let environment = environment::render_from_sources(root)
        .with_context(|| format!("cannot render {ENVIRONMENT_REFERENCE}"))?;
    let mut stale = Vec::new();
    for (relative, generated) in [
        (CONFIG_REFERENCE, config),
        (ENVIRONMENT_REFERENCE, environment),
    ] {
        let path = root.join(relative);
        let current = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        if current == generated {
            continue;
        }
        if check {
            stale.push(relative);
            continue;
        }
        std::fs::write(&path, generated)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if stale.is_empty() {
        return Ok(());
    }
    Err(CheckFailed(format!(
        "{} stale: run `{REFRESH}` to refresh",
        stale.join(", ")
    ))
    .into())
}

/// The Markdown reference of the config file, from its JSON Schema.
fn render_config_reference(schema: &Value) -> Result<String, String> {
    let mut text = format!(
        "# Configuration reference\n\n\
         <!-- Generated from the doc comments in crates/cli/src/settings/schema.rs by \
         `{REFRESH}`: edit them, not this file. -->\n\n"
    );
    text.push_str(&description(schema).ok_or("the config file has no doc comment")?);
    let sections = schema["properties"]
        .as_object()
        .ok_or("the config file has no sections")?;
    let titles: Vec<String> = sections
        .iter()
        .map(|(name, section)| section_title(name, section))
        .collect();
    let links: Vec<String> = titles
        .iter()
        .map(|title| format!("[`{title}`](#{})", anchor(title)))
        .collect();
    text.push_str(&format!("\n\nSections: {}.\n", links.join(", ")));
    for ((name, section), title) in sections.iter().zip(&titles) {
        let definition = definition(schema, section)
            .ok_or_else(|| format!("section `{name}` is not a struct"))?;
        let struct_name = reference(section).unwrap_or(name);
        let doc =
            description(definition).ok_or_else(|| format!("`{struct_name}` has no doc comment"))?;
        text.push_str(&format!("\n## `{title}`\n\n{doc}\n\n"));
        let keys = definition["properties"]
            .as_object()
            .ok_or_else(|| format!("`{struct_name}` has no keys"))?;
        for (key, property) in keys {
            let doc = description(property)
                .ok_or_else(|| format!("`{struct_name}::{key}` has no doc comment"))?;
            let doc = doc.replace("\n\n", "\n\n  ");
            text.push_str(&format!("- `{key}`: {doc}\n"));
        }
    }
    Ok(text)
}

/// `[name]`, or `[name.NAME]` for a section that is a map of tables.
fn section_title(name: &str, section: &Value) -> String {
    if section.get("additionalProperties").is_some() {
        format!("[{name}.NAME]")
    } else {
        format!("[{name}]")
    }
}

/// The name of the definition a section refers to, directly or as the value of a map.
fn reference(section: &Value) -> Option<&str> {
    section
        .get("$ref")
        .or_else(|| section.get("additionalProperties")?.get("$ref"))?
        .as_str()?
        .strip_prefix("#/$defs/")
}

/// The struct a section's keys are the properties of.
fn definition<'schema>(schema: &'schema Value, section: &Value) -> Option<&'schema Value> {
    schema.get("$defs")?.get(reference(section)?)
}

/// A doc comment as Markdown: its lines joined with spaces, its paragraphs kept.
fn description(schema: &Value) -> Option<String> {
    let text = schema.get("description")?.as_str()?;
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let paragraphs: Vec<String> = lines
        .split(|line| line.is_empty())
        .map(|paragraph| paragraph.join(" "))
        .filter(|paragraph| !paragraph.is_empty())
        .collect();
    (!paragraphs.is_empty()).then(|| paragraphs.join("\n\n"))
}

/// GitHub's anchor for a heading made of `title` in backticks.
fn anchor(title: &str) -> String {
    title
        .chars()
        .filter_map(|character| match character {
            'a'..='z' | '0'..='9' | '_' | '-' => Some(character),
            'A'..='Z' => Some(character.to_ascii_lowercase()),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::codegen::render_config_reference;

    fn check(schema: serde_json::Value, expect: Result<&str, &str>) {
        assert_eq!(
            render_config_reference(&schema).as_deref(),
            expect.map_err(|message| message.to_owned()).as_deref()
        );
    }

    #[test]
    fn sections_keys_and_paragraphs() {
        check(
            json!({
                "description": "The\nfile.\n\nTwo.",
                "properties": {
                    "limits": {"$ref": "#/$defs/RawLimits", "default": {}},
                    "tools": {"type": "object", "additionalProperties": {"$ref": "#/$defs/RawTool"}},
                },
                "$defs": {
                    "RawLimits": {
                        "description": "Limits.",
                        "properties": {"timeout": {"description": "A\ntimeout.\n\nMore."}},
                    },
                    "RawTool": {
                        "description": "A tool.",
                        "properties": {"disabled": {"description": "Off."}},
                    },
                },
            }),
            Ok("# Configuration reference\n\n\
                <!-- Generated from the doc comments in crates/cli/src/settings/schema.rs by \
                `cargo xtask codegen`: edit them, not this file. -->\n\n\
                The file.\n\nTwo.\n\n\
                Sections: [`[limits]`](#limits), [`[tools.NAME]`](#toolsname).\n\
                \n## `[limits]`\n\nLimits.\n\n- `timeout`: A timeout.\n\n  More.\n\
                \n## `[tools.NAME]`\n\nA tool.\n\n- `disabled`: Off.\n"),
        );
    }

    #[test]
    fn every_config_key_is_documented() {
        check(
            json!({
                "description": "The file.",
                "properties": {"limits": {"$ref": "#/$defs/RawLimits"}},
                "$defs": {"RawLimits": {
                    "description": "Limits.",
                    "properties": {"timeout": {"description": "A timeout."}, "memory": {}},
                }},
            }),
            Err("`RawLimits::memory` has no doc comment"),
        );
        check(
            json!({
                "description": "The file.",
                "properties": {"limits": {"$ref": "#/$defs/RawLimits"}},
                "$defs": {"RawLimits": {"properties": {}}},
            }),
            Err("`RawLimits` has no doc comment"),
        );
    }

    /// The references in the tree are what the config structs and the variables' declarations
    /// say (`cargo xtask codegen --check` says the same in CI; this keeps `cargo test` alone
    /// enough).
    #[test]
    fn generated_files_are_fresh() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        crate::codegen::run(&root, true).unwrap();
    }
}
