//! The streamable HTTP client of [`crate::McpClient`]: rmcp's reqwest client, plus the W3C `traceparent`
//! header on each POST whose MCP request carries one in its `params._meta` (SEP-414). The MCP message holds
//! the trace context for every transport; the header lets HTTP middleware between the client and the server
//! (proxies, gateways, the server's own HTTP instrumentation) continue the trace as well.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

/// rmcp's reqwest client adding the `traceparent` header of each request's `_meta`.
#[derive(Clone)]
pub(crate) struct TracingHttpClient(reqwest::Client);

/// Redirects followed, at most: rmcp's default client's bound.
const MAX_REDIRECTS: usize = 10;

impl TracingHttpClient {
    /// A client configured as rmcp's default one: no idle connections kept, only same-origin 307 and 308
    /// redirects followed (they keep the method and the body), at most [`MAX_REDIRECTS`].
    pub(crate) fn new() -> Self {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt.previous().first().is_some_and(|first| first.origin() == attempt.url().origin());
            let keeps_body = matches!(attempt.status().as_u16(), 307 | 308);
            if same_origin && keeps_body && attempt.previous().len() <= MAX_REDIRECTS {
                attempt.follow()
            } else {
                attempt.stop()
            }
        });
        let client = reqwest::Client::builder().pool_max_idle_per_host(0).redirect(policy).build();
        TracingHttpClient(client.unwrap_or_default())
    }
}

/// The `traceparent` in the `_meta` of `message`, when it is a `tools/call` request carrying one.
fn traceparent(message: &ClientJsonRpcMessage) -> Option<HeaderValue> {
    let JsonRpcMessage::Request(request) = message else { return None };
    let ClientRequest::CallToolRequest(call) = &request.request else { return None };
    let value = call.params.meta.as_ref()?.get_traceparent()?;
    HeaderValue::from_str(value).ok()
}

/// `headers` with the `traceparent` of `message`'s `_meta`, if it has one.
fn with_traceparent(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let Some(value) = traceparent(message) {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    headers
}

impl StreamableHttpClient for TracingHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_traceparent(&message, custom_headers);
        self.0.post_message(uri, message, session_id, auth_header, headers).await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_traceparent(&message, custom_headers);
        self.0
            .post_message_with_max_sse_event_size(uri, message, session_id, auth_header, headers, max_sse_event_size)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = with_traceparent(&message, custom_headers);
        self.0.post_message_with_response_limits(uri, message, session_id, auth_header, headers, limits).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.0.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{CallToolRequestParams, JsonRpcRequest, NumberOrString, RequestParamsMeta};

    fn call(traceparent: Option<&str>) -> ClientJsonRpcMessage {
        let mut params = CallToolRequestParams::new("add");
        if let Some(tp) = traceparent {
            params.set_traceparent(tp);
        }
        let request = ClientRequest::CallToolRequest(rmcp::model::Request::new(params));
        JsonRpcMessage::Request(JsonRpcRequest::new(NumberOrString::Number(1), request))
    }

    #[test]
    fn the_header_is_the_traceparent_of_the_calls_meta() {
        let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert_eq!(traceparent(&call(Some(tp))), Some(HeaderValue::from_static(tp)));
        assert_eq!(traceparent(&call(None)), None);
    }
}
