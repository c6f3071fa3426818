//! `cargo xtask new-tool NAME --lang LANG`: scaffolds an example tool into `examples/tools` through the generator's templates, as `toolsmith new` does.

use std::path::Path;

use anyhow::Context;
use serde_json::json;

/// Writes the skeleton and prints its path; refuses to overwrite.
pub(crate) fn run(root: &Path, name: &str, language: &str) -> anyhow::Result<()> {
    let request = json!({
        "name": name,
        "description": format!("The {name} example tool."),
        "language": language,
    });
    let path = toolsmith_generator::new_tool(&root.join("examples").join("tools"), &request, None)
        .with_context(|| format!("cannot scaffold {name}"))?;
    eprintln!("new-tool: wrote {}", path.display());
    Ok(())
}
