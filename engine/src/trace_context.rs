//! W3C Trace Context (`traceparent`) for the runs' spans: the remote parent a run is started under
//! ([`crate::InvokeRequest::traceparent`]) and the context an agent sends with its outgoing requests
//! ([`current_traceparent`]).
//!
//! Reading and writing the OpenTelemetry context of a `tracing` span needs the cargo feature `otel`
//! (`tracing-opentelemetry`); without it [`current_traceparent`] is `None` and a run's remote parent is only
//! passed through to the agents' outgoing requests ([`crate::RunView::traceparent`]).

/// The parts of a valid `traceparent` header value: `version-trace_id-parent_id-flags`, lowercase hex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Traceparent<'a> {
    /// 32 hex digits, not all zero.
    pub(crate) trace_id: &'a str,
    /// 16 hex digits, not all zero.
    pub(crate) parent_id: &'a str,
    /// The trace flags (bit 0: sampled).
    pub(crate) flags: u8,
}

/// Parses a `traceparent` value as W3C Trace Context level 1 reads it: version `00` exactly 55 characters; a
/// later version (not `ff`) may carry more after the flags, behind a `-`. `None` for anything invalid (a
/// receiver then starts a new trace).
pub(crate) fn parse(value: &str) -> Option<Traceparent<'_>> {
    let value = value.trim();
    let bytes = value.as_bytes();
    if bytes.len() < 55 || !value.is_char_boundary(55) {
        return None;
    }
    let version = &value[0..2];
    let lower_hex = |s: &str| s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !lower_hex(version) || version == "ff" || (version == "00" && bytes.len() != 55) {
        return None;
    }
    if bytes.len() > 55 && bytes[55] != b'-' {
        return None;
    }
    if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let (trace_id, parent_id, flags) = (&value[3..35], &value[36..52], &value[53..55]);
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    let valid = lower_hex(trace_id) && lower_hex(parent_id) && lower_hex(flags);
    if !(valid && nonzero(trace_id) && nonzero(parent_id)) {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some(Traceparent { trace_id, parent_id, flags })
}

/// The `traceparent` of the current `tracing` span's OpenTelemetry context, for an outgoing request made now
/// (an MCP tool call, an A2A message): `None` without the cargo feature `otel`, or when no
/// `tracing-opentelemetry` layer records the span.
pub fn current_traceparent() -> Option<String> {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::TraceContextExt;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let span = tracing::Span::current();
        if span.is_disabled() {
            return None;
        }
        let cx = span.context();
        let sc = cx.span().span_context().clone();
        sc.is_valid()
            .then(|| format!("00-{:032x}-{:016x}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
    }
    #[cfg(not(feature = "otel"))]
    None
}

/// Makes the remote context `traceparent` (valid, [`parse`]d) the OpenTelemetry parent of `span`, which must
/// not have been entered yet. Nothing without the cargo feature `otel` or when no layer records the span.
pub(crate) fn set_remote_parent(span: &tracing::Span, traceparent: &str) {
    #[cfg(feature = "otel")]
    {
        use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        let Some(tp) = parse(traceparent) else { return };
        let (Ok(trace_id), Ok(span_id)) = (TraceId::from_hex(tp.trace_id), SpanId::from_hex(tp.parent_id)) else {
            return;
        };
        let remote = SpanContext::new(trace_id, span_id, TraceFlags::new(tp.flags), true, TraceState::default());
        // Disabled spans and subscribers without the layer have no parent to set.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
    #[cfg(not(feature = "otel"))]
    let _ = (span, traceparent);
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_parses_into_its_parts() {
        let tp = parse(VALID).expect("valid");
        assert_eq!(tp.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tp.parent_id, "00f067aa0ba902b7");
        assert_eq!(tp.flags, 1);
        // A later version may carry more fields.
        assert!(parse(&format!("01{}-more", &VALID[2..])).is_some());
    }

    #[test]
    fn invalid_traceparents_are_refused() {
        for bad in [
            "",
            "garbage",
            &format!("{VALID}-more"),
            &VALID.replace("4bf92f3577b34da6a3ce929d0e0e4736", "00000000000000000000000000000000"),
            &VALID.replace("00f067aa0ba902b7", "0000000000000000"),
            &VALID.to_uppercase(),
            &format!("ff{}", &VALID[2..]),
            &VALID.replace('-', "_"),
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn without_an_opentelemetry_layer_there_is_no_current_traceparent() {
        let span = tracing::info_span!("invoke_agent");
        let _entered = span.enter();
        assert_eq!(current_traceparent(), None);
    }
}
