//! The MCP server behind `toolsmith serve`: rmcp's home (with `mcp/`; only `http.rs` and `export.rs`'s `mcp_tool` name it besides, as tidy checks), mapping tools to MCP tools and envelopes to call results.
//!
//! - Both protocol eras are served, as rmcp does by default: the legacy `initialize` handshake
//!   (2025-06-18, 2025-11-25) and the stateless 2026-07-28 revision (`server/discover`, `_meta`
//!   on every request).
//! - `tools/list` shows the tools policy admits, each as `<prefix><name>`, sorted by that name
//!   and paginated with a cursor that names the last tool of the previous page (so a page
//!   boundary stays put when tools are added or removed between pages).
//! - `tools/call` runs [`toolsmith_registry::Toolsmith::call`] (policy, `config`, validation,
//!   execution, every refusal an envelope) on the
//!   catalog snapshot of the moment; each call is its own task in rmcp, so calls run
//!   concurrently, bounded by the executor's `max_concurrent`, and never hold up a listing.
//! - A `notifications/cancelled` drops the call's future, which kills the tool's process tree
//!   (the executor is cancel-safe); rmcp sends no response for a cancelled request.
//! - A change of the live registry is announced as `notifications/tools/list_changed`: to a
//!   legacy session through its peer, to modern clients on each `subscriptions/listen` stream.
//! - `custom_tool` (a reserved name, listed first, unprefixed) takes a generator request as its
//!   arguments; the report is the result (an error result when rejected). A registered tool
//!   is in the live registry before the call answers, so the client that asked can call it at
//!   once; the refresh also announces the change. It obeys policy like every tool
//!   ([`toolsmith_registry::Policy::check_meta_tool`]): not offered when `[policy] disabled`
//!   names it, an `allowed` list omits it, or under a profile (`plan`, `unattended`: writing
//!   tools is neither read-only nor approval-free).
//! - Over HTTP ([`http_service`], served by `crate::http`), the same handler serves each legacy
//!   session and each stateless request; a legacy session hears of changes from the moment it
//!   is initialized, and the audit log names the client ([`ClientIdentity`]). A call over its
//!   client's limits (`crate::admission`: calls running, calls per second) is refused with a
//!   JSON-RPC error before it starts.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, SubscriptionFilter,
};
use rmcp::service::{
    NotificationContext, RequestContext, ServerInitializeError, SubscriptionContext,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::broadcast;
use toolsmith_generator::{GeneratorConfig, Report, Request, Status, request_schema};
use toolsmith_registry::{
    AuditLog, Body, CallIdentity, Catalog, ChangeEvent, EXPOSED_PREFIX, Envelope, ErrorCode, Id,
    LiveRegistry, Progress, RESERVED_NAME, Tool, ToolName, Toolsmith, error_chain,
};

mod audit;
mod calls;
mod results;

pub(crate) use crate::mcp::calls::Calls;

use crate::admission::{PerClient, Refusal};
use crate::mcp::audit::OpenCall;
use crate::mcp::results::{call_result, listed_name, page, why_not_served};

/// How many tools one `tools/list` page holds.
const PAGE_SIZE: usize = 100;

/// Everything the server needs, built by `toolsmith serve`.
#[derive(Debug)]
pub(crate) struct ServeContext {
    /// The front door every call goes through (executor, run configuration, policy).
    pub(crate) toolsmith: Toolsmith,
    pub(crate) registry: LiveRegistry,
    pub(crate) prefix: String,
    pub(crate) audit: Option<AuditLog>,
    /// The tool definitions last listed, to report a change at the next `tools/list`.
    pub(crate) definitions: std::sync::Mutex<toolsmith_registry::Definitions>,
    /// Where `custom_tool` writes; `None` when it is not offered.
    pub(crate) generator: Option<GeneratorConfig>,
    /// Why `custom_tool` refuses every request, as `generate` does (the project is not
    /// trusted and the generator writes into it); `None`: it runs.
    pub(crate) generator_refusal: Option<String>,
    /// The calls in flight, for a graceful shutdown.
    pub(crate) calls: Calls,
    /// What `/metrics` shows (served over HTTP only).
    pub(crate) metrics: crate::metrics::Metrics,
    /// The limits on each HTTP client's (IP address's) calls; `None`: no limit.
    pub(crate) per_client: Option<PerClient>,
}

/// Serves MCP on stdin/stdout until stdin closes.
pub(crate) async fn serve(context: ServeContext) -> anyhow::Result<()> {
    // Subscribed before the session starts, so a change while the client connects is not lost.
    let events = context.registry.subscribe();
    let handler = Handler::new(Arc::new(context), false);
    // Pipes (as an MCP client starts a server) are read and written on the runtime's reactor;
    // `stdio()` would hand every read and write to a blocking thread and back.
    let service = match handler.serve(rmcp::transport::stdio_pipes()).await {
        Ok(service) => service,
        // A client that goes away before its first request ends the session like any other.
        Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(error) => return Err(error).context("the MCP session could not start"),
    };
    let forwarder = tokio::spawn(announce_legacy(events, service.peer().clone()));
    let quit = service.waiting().await;
    forwarder.abort();
    let reason = quit.context("the MCP session ended abnormally")?;
    tracing::debug!(?reason, "the MCP session ended");
    Ok(())
}

/// The MCP endpoint over Streamable HTTP, which `crate::http` serves.
pub(crate) struct HttpService {
    service: StreamableHttpService<Handler, LocalSessionManager>,
    sessions: Arc<LocalSessionManager>,
}

impl HttpService {
    /// Answers one HTTP request to the endpoint (a POST of a message, a GET of a session's
    /// stream, a DELETE of a session), its body already read.
    pub(crate) async fn handle(
        &self,
        request: http::Request<http_body_util::Full<hyper::body::Bytes>>,
    ) -> http::Response<
        http_body_util::combinators::BoxBody<hyper::body::Bytes, std::convert::Infallible>,
    > {
        use rmcp::transport::streamable_http_server::SessionManager;
        if request.method() != http::Method::DELETE {
            return self.service.handle(request).await;
        }
        // rmcp answers every DELETE it accepts with 202, whether the session existed or not;
        // clients (the Python SDK and those built on it) take anything but 200/204 as a failed
        // termination. A DELETE rmcp accepted is answered 200 if the session existed, 404 if not.
        let named = request
            .headers()
            .get(rmcp::transport::common::http_header::HEADER_SESSION_ID)
            .and_then(|value| value.to_str().ok())
            .map(Arc::<str>::from);
        let existed = match &named {
            Some(id) => self.sessions.has_session(id).await.unwrap_or(false),
            None => false,
        };
        let mut response = self.service.handle(request).await;
        if response.status() == http::StatusCode::ACCEPTED {
            *response.status_mut() = if existed {
                http::StatusCode::OK
            } else {
                http::StatusCode::NOT_FOUND
            };
        }
        response
    }

    /// Ends legacy session `id` (to keep within the session bounds): its worker stops, its
    /// streams end, and its client must initialize again.
    pub(crate) async fn close_session(&self, id: &Arc<str>) {
        use rmcp::transport::streamable_http_server::SessionManager;
        if let Err(error) = self.sessions.close_session(id).await {
            tracing::debug!(%error, "a legacy session could not be closed");
        }
    }
}

/// What the Streamable HTTP service enforces before a message reaches the handler.
#[derive(Debug, Clone)]
pub(crate) struct HttpRules {
    /// The `Host` values served (403 otherwise); `None`: any.
    pub(crate) allowed_hosts: Option<Vec<String>>,
    /// The browser `Origin`s served; any other `Origin` is refused (403), also when none is
    /// listed: only a browser sends one, and a page of a foreign site must not reach the tools.
    pub(crate) allowed_origins: Vec<String>,
    /// The largest request body (413 over it).
    pub(crate) max_body: usize,
    /// A legacy session unused this long is closed.
    pub(crate) session_idle: Duration,
    /// Cancelled at shutdown: the sessions end.
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
}

/// Builds the Streamable HTTP service: one [`Handler`] per legacy session (`initialize`,
/// `Mcp-Session-Id`) or per stateless request, all on the same [`ServeContext`].
pub(crate) fn http_service(context: Arc<ServeContext>, rules: HttpRules) -> HttpService {
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_origins(rules.allowed_origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(rules.max_body)
        .with_cancellation_token(rules.shutdown);
    config = match rules.allowed_hosts {
        Some(hosts) => config.with_allowed_hosts(hosts),
        None => config.disable_allowed_hosts(),
    };
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(rules.session_idle);
    let sessions = Arc::new(sessions);
    HttpService {
        service: StreamableHttpService::new(
            move || Ok(Handler::new(Arc::clone(&context), true)),
            Arc::clone(&sessions),
            config,
        ),
        sessions,
    }
}

/// Who sent an HTTP request, as the audit log names the client: the transport puts it in the
/// request's extensions, the handler reads it back from the request context.
#[derive(Debug, Clone)]
pub(crate) struct ClientIdentity {
    /// The peer address and whether it authenticated, as the audit log shows it.
    pub(crate) text: String,
    /// The peer's IP address: one client for the per-client limit.
    pub(crate) ip: std::net::IpAddr,
}

/// How often a legacy HTTP session's announcer checks that the session is still open.
const SESSION_CHECK: Duration = Duration::from_secs(5);

/// Tells a legacy session (one that began with `initialize`) of every catalog change.
///
/// Modern sessions have no peer to notify outside a request: they hear of changes on their
/// `subscriptions/listen` streams, see [`Handler::listen`]. The task ends with the session.
async fn announce_legacy(mut events: broadcast::Receiver<ChangeEvent>, peer: Peer<RoleServer>) {
    let mut check = tokio::time::interval(SESSION_CHECK);
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = check.tick() => {
                if peer.is_transport_closed() {
                    return;
                }
                continue;
            }
        };
        match event {
            // A lagging receiver missed events, but all the client needs is to list again.
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
        if peer.peer_info().is_none() {
            continue;
        }
        if let Err(error) = peer.notify_tool_list_changed().await {
            tracing::debug!(%error, "the tool list change could not be announced");
            return;
        }
    }
}

/// The rmcp handler; rmcp clones it per request.
#[derive(Debug, Clone)]
struct Handler {
    shared: Arc<ServeContext>,
    /// Receivers subscribed when a `subscriptions/listen` was accepted, before rmcp sends its
    /// acknowledgement, so that a change right after the acknowledgement reaches the stream
    /// (rmcp calls `listen` only after acknowledging).
    pending_listeners: Arc<Mutex<VecDeque<broadcast::Receiver<ChangeEvent>>>>,
    /// Whether an initialized legacy session starts its own announcer (HTTP: a handler per
    /// session); on stdio, [`serve`] starts the one announcer before the session.
    announces_on_initialized: bool,
    /// The session every call of this handler belongs to, which its tools receive as
    /// `TOOLSMITH_SESSION_ID`: stdio has one handler per server process, HTTP one per
    /// `Mcp-Session-Id` session (and one per stateless request). It is toolsmith's own id,
    /// not the `Mcp-Session-Id`, which a tool must not learn: with the token, it would let
    /// the tool speak in the client's session.
    session: Id,
}

impl Handler {
    fn new(shared: Arc<ServeContext>, announces_on_initialized: bool) -> Handler {
        Handler {
            session: Id::random(),
            shared,
            pending_listeners: Arc::new(Mutex::new(VecDeque::new())),
            announces_on_initialized,
        }
    }

    /// The admitted tools with their listed names, sorted by those names.
    fn listed<'a>(&self, catalog: &'a Catalog) -> Vec<(String, &'a Tool)> {
        let mut tools: Vec<(String, &Tool)> = catalog
            .tools()
            .iter()
            .filter(|tool| self.shared.toolsmith.policy().check(tool).is_ok())
            .map(|tool| (listed_name(&self.shared.prefix, tool.name()), tool))
            .collect();
        tools.sort_by(|(left, _), (right, _)| left.cmp(right));
        tools
    }

    /// Calls the tool `name` of `catalog` through the front door, which checks policy, asks a
    /// pending Kodelet `config` (through the live registry's cache) and words every refusal.
    async fn call(
        &self,
        catalog: &Catalog,
        name: &ToolName,
        arguments: &Value,
        context: &RequestContext<RoleServer>,
        mut audited: OpenCall,
    ) -> Result<CallToolResult, McpError> {
        audited.name(name.as_str());
        let _in_flight = self.shared.metrics.call_started();
        let token = context.meta.get_progress_token();
        // One channel carries the tool's progress lines from its pipe to the forwarding loop
        // below; the registry drops its sender when the call ends, which ends the loop.
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let identity = audited.identity().clone();
        let mut invocation = self
            .shared
            .toolsmith
            .call(catalog, name.as_str(), arguments)
            .in_session(&identity)
            .through(&self.shared.registry);
        if token.is_some() {
            invocation = invocation.with_progress(sender);
        }
        let call = invocation.into_future();
        let forward = async {
            let Some(token) = &token else {
                return;
            };
            // MCP asks for progress that increases: a report that does not is not forwarded.
            let mut last = f64::NEG_INFINITY;
            while let Some(line) = receiver.recv().await {
                let Some(progress) = Progress::parse(&line) else {
                    continue;
                };
                if progress.progress <= last {
                    continue;
                }
                last = progress.progress;
                let mut notification =
                    ProgressNotificationParam::new(token.clone(), progress.progress);
                if let Some(total) = progress.total {
                    notification = notification.with_total(total);
                }
                if let Some(message) = progress.message {
                    notification = notification.with_message(message);
                }
                if let Err(error) = context.peer.notify_progress(notification).await {
                    tracing::debug!(%error, "a progress notification could not be sent");
                }
            }
        };
        let call = async {
            let (result, ()) = tokio::join!(call, forward);
            result
        };
        let envelope = tokio::select! {
            () = context.ct.cancelled() => {
                // Returning drops the call, which kills the tool's process tree. rmcp drops
                // whatever a cancelled request answers; an error here would only be logged as
                // a failure. A request cancelled because its transport closed is a client
                // that went away, not one that changed its mind.
                let outcome = if context.peer.is_transport_closed() {
                    audit::outcome::CLIENT_GONE
                } else {
                    audit::outcome::CANCELLED
                };
                tracing::info!(
                    tool = %name,
                    outcome,
                    client = client_identity(context).as_deref().unwrap_or("stdio"),
                    "call cancelled by the client"
                );
                self.shared.metrics.call_ended(
                    name.as_str(),
                    "cancelled",
                    audited.elapsed().as_secs_f64(),
                );
                audited.finish_as(outcome);
                return Ok(CallToolResult::error(vec![ContentBlock::text("The call was cancelled.")]));
            }
            () = self.shared.calls.killing.cancelled() => {
                // As for a cancellation, returning drops the call and kills its process tree;
                // the client is answered, so it knows to send the call again elsewhere.
                tracing::warn!(
                    tool = %name,
                    outcome = "killed",
                    client = client_identity(context).as_deref().unwrap_or("stdio"),
                    "call killed: still running when the shutdown's grace period ended"
                );
                self.shared.metrics.call_ended(
                    name.as_str(),
                    "killed",
                    audited.elapsed().as_secs_f64(),
                );
                audited.finish_as(audit::outcome::KILLED_AT_SHUTDOWN);
                return Err(McpError::internal_error(
                    "the server shut down: the call was still running when the shutdown's grace \
                     period ended, and its processes were killed; send it again to another instance",
                    Some(serde_json::json!({ "killed": true })),
                ));
            }
            result = call => match result {
                Ok(envelope) => envelope,
                Err(error) => {
                    audited.finish_as(audit::outcome::INTERNAL_ERROR);
                    return Err(McpError::internal_error(error_chain(&error), None));
                }
            },
        };
        Ok(self.answered(catalog, name, context, audited, &envelope))
    }

    /// Counts, logs and audits a call that ran to its envelope, and makes its result.
    fn answered(
        &self,
        catalog: &Catalog,
        name: &ToolName,
        context: &RequestContext<RoleServer>,
        audited: OpenCall,
        envelope: &Envelope,
    ) -> CallToolResult {
        let outcome = match &envelope.body {
            Body::Success { .. } => "ok",
            Body::Failure { error_code, .. } => error_code.as_str(),
        };
        self.shared
            .metrics
            .call_ended(name.as_str(), outcome, audited.elapsed().as_secs_f64());
        if let Some(sandbox) = &envelope.metadata.sandbox {
            self.shared
                .metrics
                .egress(sandbox.egress.iter().map(|record| record.verdict.as_str()));
        }
        tracing::info!(
            tool = %name,
            outcome,
            client = client_identity(context).as_deref().unwrap_or("stdio"),
            duration_ms = u64::try_from(audited.elapsed().as_millis()).unwrap_or(u64::MAX),
            "call answered"
        );
        audited.finish(envelope);
        call_result(catalog.get(name), envelope)
    }
}

impl Handler {
    /// Runs the generator on a `custom_tool` call; the report is the result.
    async fn generate(
        &self,
        generator: &GeneratorConfig,
        request: &Value,
        audited: OpenCall,
    ) -> Result<CallToolResult, McpError> {
        let shared = &self.shared;
        if let Some(refusal) = &shared.generator_refusal {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                refusal.clone(),
            )]));
        }
        let existing = shared.registry.snapshot();
        let report = match Request::from_json(request) {
            Ok(request) => {
                toolsmith_generator::generate(
                    &shared.toolsmith,
                    &request,
                    &existing,
                    Some(&shared.registry),
                    generator,
                )
                .await
            }
            Err(error) => Ok(Report::invalid_request(request, &error)),
        };
        let report = match report {
            Ok(report) => report,
            Err(error) => {
                audited.finish_as(audit::outcome::INTERNAL_ERROR);
                return Err(McpError::internal_error(error_chain(&error), None));
            }
        };
        // `registered` means listed and callable in this session now: the live catalog
        // serves the very file the generator installed, and policy admits it. Whatever keeps
        // it from that (a directory this server does not read, a tool of a higher layer with
        // the name, a policy list) turns the answer into an error that says why.
        let unserved = match report.status {
            Status::Registered => why_not_served(
                &self.shared.registry.snapshot(),
                self.shared.toolsmith.policy(),
                &report,
            ),
            Status::Scaffolded | Status::Rejected => None,
        };
        // A generation runs the request's test cases: it is audited like a call, its
        // outcome the report's status.
        audited.finish_as(match (report.status, &unserved) {
            (Status::Registered, None) => "registered",
            (Status::Registered, Some(_)) => "registered_not_served",
            (Status::Scaffolded, _) => "scaffolded",
            (Status::Rejected, _) => "rejected",
        });
        let value = serde_json::to_value(&report).unwrap_or(Value::Null);
        let text = serde_json::to_string_pretty(&value).unwrap_or_default();
        if let Some(why) = unserved {
            let mut result =
                CallToolResult::error(vec![ContentBlock::text(format!("{why}\n{text}"))]);
            result.meta = None;
            return Ok(result);
        }
        let mut result = match report.status {
            Status::Registered | Status::Scaffolded => {
                let mut result = CallToolResult::structured(value);
                result.content = vec![ContentBlock::text(text)];
                result
            }
            Status::Rejected => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        result.meta = None;
        Ok(result)
    }
}

/// The `custom_tool` meta-tool: its input schema is the generator's request schema.
fn custom_tool() -> rmcp::model::Tool {
    let schema = match request_schema() {
        Value::Object(schema) => {
            let mut schema = schema.clone();
            // MCP clients read the schema as a tool's input schema; the meta-schema URI
            // and title belong to the published document, not to a tool's arguments.
            schema.remove("$schema");
            schema.remove("title");
            schema
        }
        _ => JsonObject::from_iter([("type".to_owned(), Value::from("object"))]),
    };
    let description = request_schema()
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default();
    rmcp::model::Tool::new(
        RESERVED_NAME.to_owned(),
        format!(
            "{description} Use it when no listed tool fits. The new tool is listed at once (tools/list_changed) as {EXPOSED_PREFIX}<name> (or under this server's prefix)."
        ),
        Arc::new(schema),
    )
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("toolsmith", env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let catalog = self.shared.registry.snapshot();
        crate::commands::discover::observe_definitions(
            &mut self
                .shared
                .definitions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            &catalog,
            self.shared.audit.as_ref(),
        );
        let listed = self.listed(&catalog);
        let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
        let cursor = request.and_then(|request| request.cursor);
        let page = page(&names, cursor.as_deref(), PAGE_SIZE)
            .ok_or_else(|| McpError::invalid_params("invalid cursor", None))?;
        let mut tools: Vec<rmcp::model::Tool> = Vec::new();
        if page.start == 0 && self.shared.generator.is_some() {
            tools.push(custom_tool());
        }
        tools.extend(
            listed[page.start..page.end]
                .iter()
                .map(|(name, tool)| crate::export::mcp_tool(name, tool)),
        );
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = page.next_cursor;
        Ok(result)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // Audited from here, whatever happens next: see `OpenCall`.
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let audited = OpenCall::start(
            &self.shared,
            &request.name,
            &arguments,
            client_identity(&context),
            CallIdentity::in_session(&self.session),
        );
        let Some(_counted) = self.shared.calls.start() else {
            audited.finish_as(audit::outcome::REFUSED_SHUTTING_DOWN);
            return Err(McpError::internal_error(
                "the server is shutting down and takes no new calls; try again on another instance",
                None,
            ));
        };
        let _client = match (&self.shared.per_client, client_ip(&context)) {
            (Some(per_client), Some(ip)) => match per_client.admit(ip) {
                Ok(admitted) => Some(admitted),
                Err(refusal) => {
                    self.shared.metrics.call_refused(refusal.reason());
                    tracing::info!(
                        client = %ip,
                        tool = %request.name,
                        outcome = "refused",
                        reason = refusal.reason(),
                        "call refused: over a per-client limit"
                    );
                    audited.finish_as(match refusal {
                        Refusal::Concurrency { .. } => "refused_concurrency",
                        Refusal::Rate { .. } => "refused_rate",
                    });
                    return Err(refused(ip, &refusal));
                }
            },
            _ => None,
        };
        if request.name == RESERVED_NAME
            && let Some(generator) = &self.shared.generator
        {
            return Ok(self.generate(generator, &arguments, audited).await?.into());
        }
        let catalog = self.shared.registry.snapshot();
        let name = request
            .name
            .strip_prefix(self.shared.prefix.as_str())
            .and_then(|plain| ToolName::new(plain).ok())
            .filter(|name| listed_name(&self.shared.prefix, name) == request.name);
        // A name the catalog knows neither as a tool nor as a file policy refused is a
        // protocol error; every other refusal (a denied tool included) is the front door's
        // envelope.
        let Some(name) =
            name.filter(|name| catalog.get(name).is_some() || catalog.get_denied(name).is_some())
        else {
            audited.finish_as(ErrorCode::ToolNotFound.as_str());
            return Err(McpError::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        };
        let result = self
            .call(&catalog, &name, &arguments, &context, audited)
            .await?;
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.announces_on_initialized {
            tokio::spawn(announce_legacy(
                self.shared.registry.subscribe(),
                context.peer.clone(),
            ));
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let receiver = self.shared.registry.subscribe();
        self.pending_listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(receiver);
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        let pending = self
            .pending_listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front();
        let mut events = pending.unwrap_or_else(|| self.shared.registry.subscribe());
        loop {
            tokio::select! {
                () = subscription.cancelled() => return Ok(()),
                event = events.recv() => match event {
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {
                        if let Err(error) = subscription.sink().notify_tool_list_changed().await {
                            tracing::debug!(%error, "a subscription stream is gone");
                            return Ok(());
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}

/// The JSON-RPC error of a call over a per-client limit: it was not started, and the client
/// may send it again (for the rate, after `retry_after_ms`).
fn refused(ip: std::net::IpAddr, refusal: &Refusal) -> McpError {
    let (message, data) = match refusal {
        Refusal::Concurrency { limit } => (
            format!(
                "too many concurrent calls from {ip}: at most {limit} at once; this call was not started, send it again when one of yours has finished"
            ),
            serde_json::json!({"limit": limit}),
        ),
        Refusal::Rate {
            per_second,
            retry_after,
        } => {
            // Rounded up, so that a client that waits as told finds a token.
            let retry_after_ms = retry_after.as_millis() + 1;
            (
                format!(
                    "too many calls from {ip}: at most {per_second} per second; this call was not started, send it again in {retry_after_ms} ms"
                ),
                serde_json::json!({"limit_per_second": per_second, "retry_after_ms": retry_after_ms}),
            )
        }
    };
    McpError::new(rmcp::model::ErrorCode(-32000), message, Some(data))
}

/// The HTTP client of a request, as `crate::http` recorded it; `None` on stdio.
fn client_identity(context: &RequestContext<RoleServer>) -> Option<String> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ClientIdentity>())
        .map(|identity| identity.text.clone())
}

/// The HTTP client's IP address, as `crate::http` recorded it; `None` on stdio.
fn client_ip(context: &RequestContext<RoleServer>) -> Option<std::net::IpAddr> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<ClientIdentity>())
        .map(|identity| identity.ip)
}
