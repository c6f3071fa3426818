//! `toolsmith serve --http`: MCP over Streamable HTTP, with authentication, TLS and limits.
//!
//! - `/mcp` is rmcp's Streamable HTTP service ([`mcp::http_service`]) around the stdio server's
//!   handler: both eras, sessions for legacy clients, SSE streams, `Host`/`Origin` validation
//!   against DNS rebinding (403) and the body cap (413).
//! - In front of it, this module: the bearer token (401), compared in constant time; the
//!   client's identity (peer address, authenticated or not) for the audit log; `/healthz`
//!   (the process answers) and `/readyz` (the first discovery is done), both unauthenticated.
//! - The listener is bound before the first discovery, so `/readyz` can say "not yet" and an
//!   orchestrator can wait for it; `/mcp` answers 503 until then.
//! - Binding a non-loopback address without a token is refused before anything starts.
//! - What clients hold is bounded ([`bounds`]): connections (an idle one is closed after
//!   `--idle-timeout`, or for a newer one when all are open), a request's head and body must
//!   arrive in time (408 otherwise), `/mcp` requests in flight per client (429), legacy sessions
//!   (the least recently used one is closed over a bound). The open-file limit is raised to its
//!   hard limit at start, and the connections cut to what it leaves.
//! - A shutdown waits for the calls to end *and* for every answer owed to be written out
//!   before it closes the connections.

pub(crate) mod bounds;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, bail};
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::{Bytes, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::args::ServeArgs;
use crate::http::bounds::{Bounds, ConnectionGuard, Tracker};
use crate::mcp::{self, ClientIdentity, HttpRules, HttpService, ServeContext};

/// The path of the MCP endpoint.
pub(crate) const MCP_PATH: &str = "/mcp";

/// The shortest token accepted: a guessable token is no authentication.
const MIN_TOKEN_LEN: usize = 16;

/// The `Host` names a loopback server always answers to.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The bearer token clients must present. Its `Debug` does not show it.
#[derive(Clone)]
pub(crate) struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Token(..)")
    }
}

impl Token {
    /// A fresh token: 256 bits from the OS RNG, in lowercase hex.
    pub(crate) fn generate() -> anyhow::Result<Token> {
        let mut bytes = [0_u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|error| anyhow::anyhow!("the OS random number generator failed: {error}"))?;
        Ok(Token(
            bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        ))
    }

    /// The token as printed.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    fn parse(text: &str, source: &str) -> anyhow::Result<Token> {
        let token = text.trim();
        if token.len() < MIN_TOKEN_LEN {
            bail!(
                "the token from {source} is shorter than {MIN_TOKEN_LEN} characters; make one with `toolsmith token new`"
            );
        }
        if !token.bytes().all(|byte| byte.is_ascii_graphic()) {
            bail!("the token from {source} has characters an HTTP header cannot carry");
        }
        Ok(Token(token.to_owned()))
    }

    /// Whether `presented` is this token, in time that does not depend on where they differ
    /// (nor on the length of the common prefix: the digests are compared).
    fn matches(&self, presented: &[u8]) -> bool {
        let expected = Sha256::digest(self.0.as_bytes());
        let presented = Sha256::digest(presented);
        expected.ct_eq(&presented).into()
    }
}

/// Everything `serve --http` needs besides the MCP context, resolved before anything starts.
#[derive(Debug)]
pub(crate) struct HttpSettings {
    pub(crate) addr: SocketAddr,
    token: Option<Token>,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// `None`: any `Host` (an unspecified address with no `--allow-host`).
    allowed_hosts: Option<Vec<String>>,
    allowed_origins: Vec<String>,
    max_body: usize,
    bounds: Bounds,
}

impl HttpSettings {
    /// The settings of `serve --http`, or `None` to serve on stdio.
    ///
    /// `env_token` is `$TOOLSMITH_TOKEN`, read before the environment was scrubbed.
    pub(crate) fn resolve(
        args: &ServeArgs,
        env_token: Option<&str>,
        cwd: &Path,
    ) -> anyhow::Result<Option<HttpSettings>> {
        let Some(addr) = args.http else {
            return Ok(None);
        };
        let token = match (
            &args.token_file,
            env_token.filter(|token| !token.is_empty()),
        ) {
            (Some(file), _) => {
                let path = cwd.join(file);
                // A regular file of bounded size: a FIFO would keep the server from binding.
                let bytes = toolsmith_registry::read_regular(
                    &path,
                    toolsmith_registry::Links::Follow,
                    toolsmith_registry::MAX_CONFIG_BYTES,
                )
                .with_context(|| format!("cannot read the token file {}", path.display()))?;
                let text = String::from_utf8(bytes)
                    .with_context(|| format!("the token file {} is not UTF-8", path.display()))?;
                let first = text.lines().next().unwrap_or_default();
                Some(Token::parse(first, &path.display().to_string())?)
            }
            (None, Some(token)) => Some(Token::parse(token, "$TOOLSMITH_TOKEN")?),
            (None, None) => None,
        };
        if token.is_none() && !addr.ip().is_loopback() {
            bail!(
                "refusing to serve {addr} without a token: anyone who reaches it could run your tools; give --token-file FILE or $TOOLSMITH_TOKEN (make one with `toolsmith token new`), or bind a loopback address such as 127.0.0.1:{}",
                addr.port()
            );
        }
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(tls_config(&cwd.join(cert), &cwd.join(key))?),
            _ => None,
        };
        let allowed_hosts = if addr.ip().is_unspecified() && args.allow_hosts.is_empty() {
            None
        } else {
            let mut hosts: Vec<String> =
                LOOPBACK_HOSTS.iter().map(|&host| host.to_owned()).collect();
            if !addr.ip().is_unspecified() {
                hosts.push(match addr {
                    SocketAddr::V4(v4) => v4.ip().to_string(),
                    SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
                });
            }
            hosts.extend(args.allow_hosts.iter().cloned());
            Some(hosts)
        };
        Ok(Some(HttpSettings {
            addr,
            token,
            tls,
            allowed_hosts,
            allowed_origins: args.allow_origins.clone(),
            max_body: usize::try_from(args.max_body).unwrap_or(usize::MAX),
            bounds: Bounds {
                max_connections: args.max_connections.max(1),
                max_connections_per_client: args.max_connections_per_client.max(1),
                max_streams_per_client: args.max_streams_per_client.max(1),
                max_sessions: args.max_sessions.max(1),
                max_sessions_per_client: args.max_sessions_per_client.max(1),
                idle_timeout: args.idle_timeout,
                header_timeout: args.header_timeout,
                body_timeout: args.body_timeout,
                session_idle: args.session_idle_timeout,
            },
        }))
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// What the MCP endpoint enforces itself: `Host` and `Origin` rules, the body cap.
    fn rules(&self, shutdown: CancellationToken) -> HttpRules {
        HttpRules {
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            max_body: self.max_body,
            session_idle: self.bounds.session_idle,
            shutdown,
        }
    }
}

/// Loads a PEM certificate chain and its private key.
fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|error| anyhow::anyhow!("{error}"))
        .with_context(|| format!("cannot read the TLS certificate {}", cert.display()))?;
    if chain.is_empty() {
        bail!("{} holds no PEM certificate", cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|error| anyhow::anyhow!("{error}"))
        .with_context(|| format!("cannot read the TLS key {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("cannot set up TLS")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the TLS certificate and key do not make a usable pair")?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A bound listener, before it serves.
#[derive(Debug)]
pub(crate) struct HttpServer {
    listener: TcpListener,
    settings: HttpSettings,
}

/// The server once it accepts connections; [`Running::serve`] installs the MCP service.
#[derive(Debug)]
pub(crate) struct Running {
    state: Arc<State>,
    rules: HttpRules,
    shutdown: CancellationToken,
    accepting: tokio::task::JoinHandle<()>,
}

struct State {
    token: Option<Token>,
    tracker: Arc<Tracker>,
    max_body: usize,
    tls: Option<TlsAcceptor>,
    /// Set once the first discovery is done.
    service: OnceLock<HttpService>,
    /// The context served, for `/metrics`; set with `service`.
    context: OnceLock<Arc<ServeContext>>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("State")
            .field("token", &self.token)
            .field("tls", &self.tls.is_some())
            .field("ready", &self.service.get().is_some())
            .finish()
    }
}

type BoxResponse = Response<BoxBody<Bytes, Infallible>>;

impl HttpServer {
    /// Raises the open-file limit, binds the address and prints where the endpoint is on
    /// stderr.
    pub(crate) async fn bind(mut settings: HttpSettings) -> anyhow::Result<HttpServer> {
        let descriptors = raise_descriptor_limit();
        settings.bounds = settings.bounds.within(descriptors);
        tracing::debug!(descriptors, bounds = ?settings.bounds, "client bounds");
        let listener = TcpListener::bind(settings.addr)
            .await
            .with_context(|| format!("cannot listen on {}", settings.addr))?;
        let local = listener
            .local_addr()
            .context("the listener has no address")?;
        let url = format!("{}://{local}{MCP_PATH}", settings.scheme());
        let token_required = settings.token.is_some();
        if crate::logging::format() == crate::logging::LogFormat::Json {
            tracing::info!(target: crate::logging::ANNOUNCE_TARGET, %url, token_required, "serving MCP");
        } else {
            let line = format!(
                "toolsmith: serving MCP on {url}{}\n",
                if token_required {
                    " (bearer token required)"
                } else {
                    ""
                }
            );
            use std::io::Write;
            let _ignored = std::io::stderr().lock().write_all(line.as_bytes());
        }
        Ok(HttpServer { listener, settings })
    }

    /// Accepts connections: `/healthz` answers at once, `/readyz` and `/mcp` say "not yet"
    /// until [`Running::serve`].
    pub(crate) fn start(self) -> Running {
        let shutdown = CancellationToken::new();
        let state = Arc::new(State {
            token: self.settings.token.clone(),
            tracker: Tracker::new(self.settings.bounds),
            max_body: self.settings.max_body,
            tls: self.settings.tls.clone().map(TlsAcceptor::from),
            service: OnceLock::new(),
            context: OnceLock::new(),
        });
        let accepting = tokio::spawn(accept_loop(
            self.listener,
            Arc::clone(&state),
            shutdown.clone(),
        ));
        Running {
            rules: self.settings.rules(shutdown.child_token()),
            state,
            shutdown,
            accepting,
        }
    }
}

impl Running {
    /// Serves MCP on `context` until SIGTERM or SIGINT, then shuts down gracefully: no new
    /// connection nor call is taken, the calls running may finish within `grace`; then the
    /// calls still running are killed (their process trees with them) and each answers its
    /// client with an error that says so, and the sessions end.
    pub(crate) async fn serve(
        self,
        context: ServeContext,
        grace: std::time::Duration,
    ) -> anyhow::Result<()> {
        let context = Arc::new(context);
        let service = mcp::http_service(Arc::clone(&context), self.rules);
        if self.state.context.set(Arc::clone(&context)).is_err()
            || self.state.service.set(service).is_err()
        {
            bail!("the MCP service was installed twice");
        }
        tracing::info!("ready: the first discovery is done");
        let signal = shutdown_signal().await;
        self.accepting.abort();
        context.calls.drain();
        let tracker: &Tracker = &self.state.tracker;
        let calls = &context.calls;
        // Done when no call runs and every answer owed (a call's, a refusal's) has been
        // written to its client: only then may the connections close.
        let delivered = move || async move {
            calls.idle().await;
            tracker.settled().await;
        };
        let running = context.calls.running();
        tracing::warn!(
            signal,
            running,
            ?grace,
            "shutting down: waiting for the running calls"
        );
        if tokio::time::timeout(grace, delivered()).await.is_err() {
            tracing::warn!(
                killed = context.calls.running(),
                "calls still running after the grace period are killed, and their clients told"
            );
            context.calls.kill_running();
            // A killed call returns as soon as its process tree is dead; its answer then
            // still has to leave through its client's stream before the sessions end.
            if tokio::time::timeout(KILL_BUDGET, delivered())
                .await
                .is_err()
            {
                tracing::warn!(
                    owed = tracker.owed(),
                    "answers still not written after the kill budget: their connections close"
                );
            }
        }
        self.shutdown.cancel();
        Ok(())
    }

    /// Stops accepting, for a start that failed after the listener was bound.
    pub(crate) fn abort(self) {
        self.shutdown.cancel();
        self.accepting.abort();
    }
}

/// How long a shutdown waits for the calls it killed to return and their answers to leave.
const KILL_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);

/// The largest open-file limit asked for (`RLIMIT_NOFILE` cannot be infinite).
const MAX_DESCRIPTORS: u64 = 1 << 20;

/// Raises the soft open-file limit to the hard one (at most [`MAX_DESCRIPTORS`]), with nix's
/// `setrlimit` which the project already uses, and returns the limit in force: every client
/// connection is a descriptor, and the default soft limit (1 024) is a few hundred idle
/// clients away from a rescan that cannot open the tool directories.
fn raise_descriptor_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    let wanted = hard.min(MAX_DESCRIPTORS);
    if wanted <= soft {
        return soft;
    }
    match setrlimit(Resource::RLIMIT_NOFILE, wanted, hard) {
        Ok(()) => wanted,
        Err(error) => {
            tracing::warn!(%error, soft, hard, "cannot raise the open-file limit");
            soft
        }
    }
}

/// Waits for SIGTERM or SIGINT and names it.
async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        },
        // Without signal handlers the default actions end the process.
        _ => std::future::pending().await,
    }
}

/// Accepts connections until `shutdown`, each served on its own task.
async fn accept_loop(listener: TcpListener, state: Arc<State>, shutdown: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of descriptors, most likely: wait a little instead of spinning.
                tracing::warn!(%error, "cannot accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over the bounds, the connection is closed at once: it holds no descriptor.
        let Some(guard) = state.tracker.connect(peer.ip()) else {
            tracing::debug!(%peer, "refused a connection: over the connection bounds");
            continue;
        };
        let state = Arc::clone(&state);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let guard = Arc::new(guard);
            let idle_timeout = state.tracker.bounds.idle_timeout;
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = guard.closed().cancelled() => {}
                () = idle(&guard, idle_timeout) => {
                    tracing::debug!(%peer, "closed an idle connection");
                }
                () = connection(stream, peer, Arc::clone(&state), Arc::clone(&guard)) => {}
            }
        });
    }
}

/// Returns once the connection has had no request in flight for `timeout`.
async fn idle(guard: &ConnectionGuard, timeout: std::time::Duration) {
    let check = (timeout / 4).clamp(
        std::time::Duration::from_millis(10),
        std::time::Duration::from_secs(1),
    );
    loop {
        tokio::time::sleep(check).await;
        if guard.idle_for().is_some_and(|idle| idle >= timeout) {
            return;
        }
    }
}

/// Serves one connection, over TLS if configured.
async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    state: Arc<State>,
    guard: Arc<ConnectionGuard>,
) {
    let _ignored = stream.set_nodelay(true);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(state.tracker.bounds.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let service_state = Arc::clone(&state);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let state = Arc::clone(&service_state);
        let guard = Arc::clone(&guard);
        async move {
            // Counted until its response body is written to the end or dropped; an `/mcp`
            // request also counts against its client's streams.
            let Some(held) = guard.request(request.uri().path() == MCP_PATH) else {
                let mut response = text(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too Many Requests: this client has all its streams open\n",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
                return Ok::<_, Infallible>(response);
            };
            let response = route(&state, peer, request).await;
            Ok::<_, Infallible>(hold(response, held))
        }
    });
    let served = match &state.tls {
        Some(acceptor) => {
            let handshake =
                tokio::time::timeout(state.tracker.bounds.header_timeout, acceptor.accept(stream));
            match handshake.await {
                Ok(Ok(tls)) => builder.serve_connection(TokioIo::new(tls), service).await,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "a TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "a TLS handshake took too long");
                    return;
                }
            }
        }
        None => {
            builder
                .serve_connection(TokioIo::new(stream), service)
                .await
        }
    };
    if let Err(error) = served {
        tracing::debug!(%peer, %error, "a connection ended with an error");
    }
}

/// A response body that holds `held` until it is written to the end or dropped.
struct Held<T> {
    body: BoxBody<Bytes, Infallible>,
    _held: T,
}

impl<T: Send + Sync + Unpin + 'static> hyper::body::Body for Held<T> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// `response`, its body holding `held` until written.
fn hold<T: Send + Sync + Unpin + 'static>(response: BoxResponse, held: T) -> BoxResponse {
    response.map(|body| Held { body, _held: held }.boxed())
}

/// Routes one request.
async fn route(state: &State, peer: SocketAddr, request: Request<Incoming>) -> BoxResponse {
    match request.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => readiness(state),
        "/metrics" => {
            if let Some(refused) = unauthorized(state, &request, peer) {
                return refused;
            }
            match state.context.get() {
                Some(context) => {
                    let mut response =
                        Response::new(Full::new(Bytes::from(context.metrics.encode())).boxed());
                    response.headers_mut().insert(
                        header::CONTENT_TYPE,
                        header::HeaderValue::from_static(
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        ),
                    );
                    response
                }
                None => text(StatusCode::SERVICE_UNAVAILABLE, "discovering tools\n"),
            }
        }
        MCP_PATH => {
            if let Some(refused) = unauthorized(state, &request, peer) {
                return refused;
            }
            let authenticated = state.token.is_some();
            let Some(service) = state.service.get() else {
                let mut response = text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Service Unavailable: discovering tools\n",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
                return response;
            };
            let text = if authenticated {
                format!("{peer} (token)")
            } else {
                format!("{peer} (no token)")
            };
            let identity = ClientIdentity {
                text,
                ip: peer.ip(),
            };
            mcp_request(state, service, identity, request).await
        }
        _ => text(StatusCode::NOT_FOUND, "Not Found\n"),
    }
}

/// `/readyz`: 200 once the first discovery is done and the last scan of the tool directories
/// succeeded; 503 before, and while the catalog served is the last good one because a rescan
/// failed (the reason is in the body).
fn readiness(state: &State) -> BoxResponse {
    let Some(context) = state.context.get() else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "discovering tools\n");
    };
    match context.registry.scan_failure() {
        None => text(StatusCode::OK, "ready\n"),
        Some(reason) => {
            let mut response = Response::new(
                Full::new(Bytes::from(format!(
                    "the last rescan failed, the last good catalog is served: {reason}\n"
                )))
                .boxed(),
            );
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            response
        }
    }
}

/// One `/mcp` request: its body read within the body timeout and the size cap, the answer it
/// is owed counted until written, its legacy session tracked within the session bounds.
async fn mcp_request(
    state: &State,
    service: &HttpService,
    identity: ClientIdentity,
    request: Request<Incoming>,
) -> BoxResponse {
    let ip = identity.ip;
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(identity);
    let limited = http_body_util::Limited::new(body, state.max_body);
    let bytes =
        match tokio::time::timeout(state.tracker.bounds.body_timeout, limited.collect()).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
                return text(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large\n");
            }
            Ok(Err(_)) => return text(StatusCode::BAD_REQUEST, "Bad Request: unreadable body\n"),
            Err(_) => {
                return text(
                    StatusCode::REQUEST_TIMEOUT,
                    "Request Timeout: the body did not arrive in time\n",
                );
            }
        };
    // A request (not a notification nor a response) is owed an answer; a subscription's
    // stream stays open as long as the client listens, and is no answer a shutdown waits for.
    let owed = (parts.method == http::Method::POST)
        .then(|| serde_json::from_slice::<JsonRpcHead>(&bytes).ok())
        .flatten()
        .filter(|head| head.id.is_some() && head.method.as_deref() != Some("subscriptions/listen"))
        .map(|_| state.tracker.owe());
    let session = parts
        .headers
        .get(rmcp::transport::common::http_header::HEADER_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if let Some(session) = &session {
        state.tracker.session_used(session);
    }
    let deleting = parts.method == http::Method::DELETE;
    let response = service
        .handle(Request::from_parts(parts, Full::new(bytes)))
        .await;
    match session {
        Some(session) if deleting && response.status().is_success() => {
            state.tracker.session_ended(&session);
        }
        Some(_) => {}
        None => {
            let created = response
                .headers()
                .get(rmcp::transport::common::http_header::HEADER_SESSION_ID)
                .and_then(|value| value.to_str().ok());
            if let Some(created) = created {
                for closed in state.tracker.session_created(ip, Arc::from(created)) {
                    tracing::info!(client = %ip, session = %closed, "closed a legacy session: over the session bounds");
                    service.close_session(&closed).await;
                }
            }
        }
    }
    hold(response, owed)
}

/// The fields of a JSON-RPC message that say whether it is a request, and which.
#[derive(serde::Deserialize)]
struct JsonRpcHead {
    id: Option<serde_json::Value>,
    method: Option<String>,
}

/// The 401 a request without the token gets, if a token is required.
fn unauthorized<B>(state: &State, request: &Request<B>, peer: SocketAddr) -> Option<BoxResponse> {
    let token = state.token.as_ref()?;
    if presents(request, token) {
        return None;
    }
    tracing::info!(%peer, "refused: no valid bearer token");
    let mut response = text(
        StatusCode::UNAUTHORIZED,
        "Unauthorized: send Authorization: Bearer <token>\n",
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    Some(response)
}

/// Whether the request carries `Authorization: Bearer <token>`.
fn presents<B>(request: &Request<B>, token: &Token) -> bool {
    let Some(value) = request.headers().get(header::AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let scheme = b"bearer ";
    if value.len() < scheme.len() || !value[..scheme.len()].eq_ignore_ascii_case(scheme) {
        return false;
    }
    token.matches(value[scheme.len()..].trim_ascii())
}

fn text(status: StatusCode, body: &'static str) -> BoxResponse {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::Token;

    #[test]
    fn tokens_are_fresh_and_long() {
        let first = Token::generate().unwrap();
        let second = Token::generate().unwrap();
        assert_eq!(first.as_str().len(), 64);
        assert!(first.as_str().bytes().all(|byte| byte.is_ascii_hexdigit()));
        assert_ne!(first.as_str(), second.as_str());
    }

    #[test]
    fn a_token_matches_itself_only() {
        let token = Token::parse("  0123456789abcdef0123  \n", "test").unwrap();
        assert!(token.matches(b"0123456789abcdef0123"));
        assert!(!token.matches(b"0123456789abcdef012"));
        assert!(!token.matches(b"0123456789abcdef01234"));
        assert!(!token.matches(b""));
        assert!(format!("{token:?}").find("0123").is_none());
    }

    #[test]
    fn weak_tokens_are_refused() {
        assert!(Token::parse("short", "test").is_err());
        assert!(Token::parse("0123456789abcdef\u{7f}x", "test").is_err());
        assert!(Token::parse("0123456789 abcdef", "test").is_err());
    }
}
