//! `docs/environment.md`: every environment variable toolsmith reads, rendered from the doc comments of their declarations.
//!
//! The declarations are the CLI's `EnvVars` (every constant of `impl EnvVars` in
//! `crates/cli/src/env_vars.rs`) and the executor's public `*_VAR` constants (the variables
//! the executor reads itself, such as `TOOLSMITH_DISABLE_FEATURES`). They are read from the
//! source with syn, as the size rule of tidy reads it, so a variable declared there with its
//! doc comment is in the reference after `cargo xtask codegen`, and one declared without a
//! doc comment is an error naming it.

use std::path::Path;

use anyhow::Context;

/// The environment reference, relative to the workspace root.
pub(crate) const ENVIRONMENT_REFERENCE: &str = "docs/environment.md";

/// The file of the CLI's `EnvVars`, relative to the workspace root.
const CLI_VARIABLES: &str = "crates/cli/src/env_vars.rs";

/// The executor's sources, relative to the workspace root.
const EXECUTOR_SOURCES: &str = "crates/executor/src";

/// One documented variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Variable {
    /// The variable's name, the value of its constant.
    name: String,
    /// Its doc comment as Markdown.
    doc: String,
}

/// The Markdown reference of the environment, from the workspace's sources at `root`.
pub(crate) fn render_from_sources(root: &Path) -> anyhow::Result<String> {
    let cli_path = root.join(CLI_VARIABLES);
    let cli_text = std::fs::read_to_string(&cli_path)
        .with_context(|| format!("cannot read {}", cli_path.display()))?;
    let cli =
        env_vars(&cli_text).map_err(|message| anyhow::anyhow!("{CLI_VARIABLES}: {message}"))?;
    let mut executor = Vec::new();
    for path in rust_files(&root.join(EXECUTOR_SOURCES))? {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let found = executor_variables(&text)
            .map_err(|message| anyhow::anyhow!("{}: {message}", path.display()))?;
        executor.extend(found);
    }
    Ok(render(&cli, &executor))
}

/// The `.rs` files below `dir`, sorted, so the reference does not depend on directory order.
fn rust_files(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in
            std::fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))?
        {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The constants of `impl EnvVars` in `text`, in declaration order.
fn env_vars(text: &str) -> Result<Vec<Variable>, String> {
    let file = syn::parse_file(text).map_err(|error| format!("does not parse: {error}"))?;
    let mut variables = Vec::new();
    for item in &file.items {
        let syn::Item::Impl(block) = item else {
            continue;
        };
        let syn::Type::Path(self_type) = block.self_ty.as_ref() else {
            continue;
        };
        if !self_type.path.is_ident("EnvVars") {
            continue;
        }
        for impl_item in &block.items {
            if let syn::ImplItem::Const(constant) = impl_item {
                variables.push(variable(&constant.ident, &constant.attrs, &constant.expr)?);
            }
        }
    }
    if variables.is_empty() {
        return Err("no constant in `impl EnvVars`".to_owned());
    }
    Ok(variables)
}

/// The public `NAME_VAR: &str` constants of `text`, in declaration order.
fn executor_variables(text: &str) -> Result<Vec<Variable>, String> {
    let file = syn::parse_file(text).map_err(|error| format!("does not parse: {error}"))?;
    let mut variables = Vec::new();
    for item in &file.items {
        let syn::Item::Const(constant) = item else {
            continue;
        };
        if matches!(constant.vis, syn::Visibility::Public(_))
            && constant.ident.to_string().ends_with("_VAR")
        {
            variables.push(variable(&constant.ident, &constant.attrs, &constant.expr)?);
        }
    }
    Ok(variables)
}

/// A constant's value (a string literal) and its doc comment.
fn variable(
    ident: &syn::Ident,
    attrs: &[syn::Attribute],
    expr: &syn::Expr,
) -> Result<Variable, String> {
    let syn::Expr::Lit(syn::ExprLit {
        lit: syn::Lit::Str(name),
        ..
    }) = expr
    else {
        return Err(format!("`{ident}` is not a string literal"));
    };
    let lines: Vec<String> = attrs
        .iter()
        .filter_map(|attr| match &attr.meta {
            syn::Meta::NameValue(pair) if pair.path.is_ident("doc") => match &pair.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(line),
                    ..
                }) => Some(line.value()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let paragraphs: Vec<String> = lines
        .split(|line| line.trim().is_empty())
        .map(|paragraph| {
            paragraph
                .iter()
                .map(|line| line.trim())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|paragraph| !paragraph.is_empty())
        .collect();
    if paragraphs.is_empty() {
        return Err(format!("`{ident}` has no doc comment"));
    }
    Ok(Variable {
        name: name.value(),
        doc: paragraphs.join("\n\n  "),
    })
}

/// The reference: the CLI's variables, then the executor's.
fn render(cli: &[Variable], executor: &[Variable]) -> String {
    let mut text = String::from(
        "# Environment variables\n\n\
         <!-- Generated from the doc comments of `EnvVars` (crates/cli/src/env_vars.rs) and of the \
         executor's public `*_VAR` constants (crates/executor/src) by `cargo xtask codegen`: \
         edit them, not this file. -->\n\n\
         The variables toolsmith itself reads.\n\
         A tool receives none of them unless `[env] allow` names it, and no `TOOLSMITH_*` variable \
         in any case ([operators.md](operators.md#environment)); the variables toolsmith sets for \
         a tool are in [protocol.md](protocol.md).\n\
         Flags beat these variables, which beat the config files ([config.md](config.md)).\n\n\
         ## toolsmith\n\n",
    );
    for variable in cli {
        text.push_str(&format!("- `{}`: {}\n", variable.name, variable.doc));
    }
    text.push_str(
        "\n## The executor\n\nRead by `toolsmith-executor` itself, whoever embeds it.\n\n",
    );
    for variable in executor {
        text.push_str(&format!("- `{}`: {}\n", variable.name, variable.doc));
    }
    text
}

#[cfg(test)]
mod tests {
    use crate::codegen::environment::{env_vars, executor_variables, render};

    fn check_render(cli: &str, executor: &str, expect: Result<&str, &str>) {
        let rendered = env_vars(cli)
            .and_then(|cli| executor_variables(executor).map(|executor| render(&cli, &executor)));
        match (rendered, expect) {
            (Ok(text), Ok(sections)) => {
                let start = text.find("## toolsmith").expect("the CLI's section");
                assert_eq!(&text[start..], sections);
            }
            (Err(message), Err(expected)) => assert_eq!(message, expected),
            (got, expected) => panic!("got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn every_constant_of_env_vars_and_every_public_var_of_the_executor() {
        check_render(
            "pub struct EnvVars;\n\
             impl EnvVars {\n\
             /// The user's home.\n\
             /// Second line.\n\
             ///\n\
             /// A paragraph.\n\
             pub const HOME: &'static str = \"HOME\";\n\
             /// The log filter.\n\
             pub const TOOLSMITH_LOG: &'static str = \"TOOLSMITH_LOG\";\n\
             }\n\
             impl Other { /// Not a variable.\n pub const X: &'static str = \"X\"; }\n",
            "/// Probes off.\npub const DISABLE_FEATURES_VAR: &str = \"TOOLSMITH_DISABLE_FEATURES\";\n\
             /// Set for tools, not read.\npub(crate) const MARKER_VAR: &str = \"TOOLSMITH_RUN_ID\";\n\
             /// Not a variable.\npub const LIMIT: &str = \"x\";\n",
            Ok("## toolsmith\n\n\
                - `HOME`: The user's home. Second line.\n\n  A paragraph.\n\
                - `TOOLSMITH_LOG`: The log filter.\n\
                \n## The executor\n\nRead by `toolsmith-executor` itself, whoever embeds it.\n\n\
                - `TOOLSMITH_DISABLE_FEATURES`: Probes off.\n"),
        );
    }

    #[test]
    fn a_variable_without_a_doc_comment_is_an_error() {
        check_render(
            "impl EnvVars { pub const HOME: &'static str = \"HOME\"; }",
            "",
            Err("`HOME` has no doc comment"),
        );
        check_render(
            "impl EnvVars { /// Home.\n pub const HOME: &'static str = \"HOME\"; }",
            "pub const NEW_VAR: &str = \"TOOLSMITH_NEW\";",
            Err("`NEW_VAR` has no doc comment"),
        );
        check_render(
            "pub struct EnvVars;",
            "",
            Err("no constant in `impl EnvVars`"),
        );
    }
}
