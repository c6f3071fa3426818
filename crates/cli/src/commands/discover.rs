//! Discovery as the commands ask for it: through the discovery cache the settings name, which is saved afterwards.

use toolsmith_registry::{
    AuditLog, Catalog, DefinitionChange, Definitions, DiscoveryCache, DiscoveryProgress, ToolName,
    Toolsmith, error_chain,
};

use crate::settings::GlobalSettings;

/// The discovery cache: the one stored in the cache directory, or one in memory only when
/// the cache is off.
pub(crate) fn discovery_cache(global: &GlobalSettings) -> DiscoveryCache {
    match &global.cache_dir {
        Some(dir) => DiscoveryCache::load(dir),
        None => DiscoveryCache::in_memory(),
    }
}

/// Discovers every tool of the layers through the discovery cache, then saves the cache.
/// A file the policy refuses is never run: it is in the catalog's `denied`.
pub(crate) async fn discover(
    global: &GlobalSettings,
    toolsmith: &Toolsmith,
    progress: &(dyn Fn(DiscoveryProgress) + Sync),
) -> Catalog {
    let mut cache = discovery_cache(global);
    let catalog = toolsmith
        .discover_layers(&global.layers, &mut cache, progress)
        .await;
    save_discovery_cache(&mut cache);
    catalog
}

/// Discovers only the files that would provide `name` (asking a Kodelet tool's `config`
/// if it never was), through the discovery cache, then saves the cache.
pub(crate) async fn discover_tool(
    global: &GlobalSettings,
    toolsmith: &Toolsmith,
    name: &ToolName,
) -> Catalog {
    let mut cache = discovery_cache(global);
    let catalog = toolsmith
        .discover_one(&global.layers, &mut cache, name)
        .await;
    save_discovery_cache(&mut cache);
    catalog
}

/// The record of the tool definitions last listed, beside the discovery cache (in memory
/// when the cache is off: changes are then seen within one `serve` only).
pub(crate) fn definitions(global: &GlobalSettings) -> Definitions {
    match &global.cache_dir {
        Some(dir) => Definitions::load(dir),
        None => Definitions::in_memory(),
    }
}

/// Records the definitions of `catalog`'s tools as listed now, and reports each tool whose
/// definition (description, schemas, annotations, sandbox) changed since the last listing:
/// a warning, and a line in `audit` with the old and new digests. Returns the changes, for
/// the listing's marker.
pub(crate) fn observe_definitions(
    definitions: &mut Definitions,
    catalog: &Catalog,
    audit: Option<&AuditLog>,
) -> Vec<DefinitionChange> {
    let changes = definitions.observe(catalog);
    if let Err(error) = definitions.save() {
        tracing::warn!(%error, "the record of tool definitions was not saved; the next listing reports these changes again");
    }
    for change in &changes {
        tracing::warn!(
            "the definition of tool {} changed since it was last listed (sha256 {} -> {})",
            change.name,
            &change.old_sha256[..12.min(change.old_sha256.len())],
            &change.new_sha256[..12.min(change.new_sha256.len())],
        );
        if let Some(audit) = audit
            && let Err(error) = audit.append_definition_change(change)
        {
            tracing::warn!(error = %error_chain(&error), "a definition change was not audited");
        }
    }
    changes
}

/// Writes `cache` back. A cache that cannot be written costs probes next time, not this
/// command, so the failure is a warning.
fn save_discovery_cache(cache: &mut DiscoveryCache) {
    if let Err(error) = cache.save() {
        let message = toolsmith_registry::error_chain(&error);
        tracing::warn!("{message}; unchanged tools will be probed again next time");
    }
}
