//! agentic
