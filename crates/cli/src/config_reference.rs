//! `docs/config.md`, generated from the doc comments of the config file's `Raw*` structs in `settings/schema.rs`, so the reference cannot drift from the parser.
//!
//! The `config_reference` test compares the file with what the structs say
//! and fails when it is stale; `UPDATE_DOCS=1 cargo test -p toolsmith
//! config_reference` rewrites it (as rust-analyzer's sourcegen tests do).
//! A section is a field of `RawFile` whose type is a documented `Raw*` struct
//! (or a map of one, for `[tools.NAME]`); its keys are that struct's fields.

use std::collections::BTreeMap;

/// One documented item: a struct or a field.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Documented {
    name: String,
    doc: String,
    /// The field's type (empty for a struct).
    ty: String,
}

/// The structs of `source` with their docs and documented fields.
fn structs(source: &str) -> BTreeMap<String, (String, Vec<Documented>)> {
    let mut found = BTreeMap::new();
    let mut doc: Vec<String> = Vec::new();
    let mut current: Option<(String, String, Vec<Documented>)> = None;
    for line in source.lines() {
        let trimmed = line.trim();
        if let Some(text) = trimmed.strip_prefix("///") {
            doc.push(text.strip_prefix(' ').unwrap_or(text).to_owned());
            continue;
        }
        if trimmed.starts_with("#[") {
            continue;
        }
        match current.as_mut() {
            None => {
                let header = trimmed.strip_prefix("pub(super) ").unwrap_or(trimmed);
                if let Some(rest) = header.strip_prefix("struct ")
                    && let Some(name) = rest.strip_suffix(" {")
                {
                    current = Some((name.to_owned(), join(&doc), Vec::new()));
                }
            }
            Some((name, struct_doc, fields)) => {
                if trimmed == "}" {
                    found.insert(
                        std::mem::take(name),
                        (std::mem::take(struct_doc), std::mem::take(fields)),
                    );
                    current = None;
                } else if let Some((field, ty)) = trimmed.split_once(": ") {
                    fields.push(Documented {
                        name: field.trim_start_matches("pub(super) ").to_owned(),
                        doc: join(&doc),
                        ty: ty.trim_end_matches(',').to_owned(),
                    });
                }
            }
        }
        doc.clear();
    }
    found
}

/// Doc lines as Markdown: lines joined with spaces, paragraphs kept.
fn join(lines: &[String]) -> String {
    lines
        .split(|line| line.is_empty())
        .map(|paragraph| paragraph.join(" "))
        .filter(|paragraph| !paragraph.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The reference, from the source of `settings/schema.rs`.
fn render(source: &str) -> Result<String, String> {
    let structs = structs(source);
    let (file_doc, sections) = structs
        .get("RawFile")
        .ok_or("settings/schema.rs has no `struct RawFile`")?;
    let mut text = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from the doc comments in crates/cli/src/settings/schema.rs by \
         `UPDATE_DOCS=1 cargo test -p toolsmith config_reference`: edit them, not this file. -->\n\n",
    );
    text.push_str(file_doc);
    text.push_str("\n\nSections: ");
    let titles: Vec<String> = sections.iter().map(section_title).collect();
    text.push_str(
        &titles
            .iter()
            .map(|title| format!("[`{title}`](#{})", anchor(title)))
            .collect::<Vec<_>>()
            .join(", "),
    );
    text.push_str(".\n");
    for (section, title) in sections.iter().zip(&titles) {
        let struct_name = section
            .ty
            .trim_start_matches("BTreeMap<String, ")
            .trim_end_matches('>');
        let (doc, keys) = structs
            .get(struct_name)
            .ok_or_else(|| format!("section `{}` has no struct `{struct_name}`", section.name))?;
        if doc.is_empty() {
            return Err(format!("`{struct_name}` has no doc comment"));
        }
        text.push_str(&format!("\n## `{title}`\n\n{doc}\n\n"));
        for key in keys {
            if key.doc.is_empty() {
                return Err(format!("`{struct_name}::{}` has no doc comment", key.name));
            }
            let doc = key.doc.replace("\n\n", "\n\n  ");
            text.push_str(&format!("- `{}`: {doc}\n", key.name));
        }
    }
    Ok(text)
}

fn section_title(section: &Documented) -> String {
    if section.ty.starts_with("BTreeMap<String, ") {
        format!("[{}.NAME]", section.name)
    } else {
        format!("[{}]", section.name)
    }
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
    use std::path::Path;

    use super::{render, structs};

    #[test]
    fn config_reference() {
        let generated = render(include_str!("settings/schema.rs")).unwrap();
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md");
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == generated {
            return;
        }
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &generated).unwrap();
            return;
        }
        panic!(
            "docs/config.md is stale: run `UPDATE_DOCS=1 cargo test -p toolsmith config_reference`"
        );
    }

    #[test]
    fn every_config_key_is_documented() {
        // `render` refuses an undocumented section or key.
        let source = "\
/// The file.
struct RawFile {
    #[serde(default)]
    limits: RawLimits,
}

/// Limits.
struct RawLimits {
    /// A timeout.
    timeout: Option<Scalar>,
    memory: Option<Scalar>,
}
";
        assert_eq!(
            render(source).unwrap_err(),
            "`RawLimits::memory` has no doc comment"
        );
    }

    #[test]
    fn parses_structs_docs_and_fields() {
        let source = "\
/// One
/// line.
///
/// Two.
#[derive(Debug)]
struct RawX {
    /// The key.
    #[serde(default)]
    key: Option<Vec<String>>,
}
";
        let parsed = structs(source);
        let (doc, fields) = &parsed["RawX"];
        assert_eq!(doc, "One line.\n\nTwo.");
        assert_eq!(fields[0].name, "key");
        assert_eq!(fields[0].doc, "The key.");
        assert_eq!(fields[0].ty, "Option<Vec<String>>");
    }
}
