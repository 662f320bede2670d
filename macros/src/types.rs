//! Reading types and docs: `Option<T>` and `Result<T, E>` seen through, the crate the expansion names, the
//! summary of a doc comment.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{Attribute, Expr, ExprLit, GenericArgument, Lit, Meta, PathArguments, Type};

use crate::args::Args;

/// The type arguments of `ty` when its last path segment is `name` (`Option<T>`, `std::result::Result<T, E>`).
fn generic_args<'a>(ty: &'a Type, name: &str) -> Option<Vec<&'a Type>> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else { return None };
    Some(
        args.args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
    )
}

/// `T` when `ty` is `Option<T>`.
pub fn option_inner(ty: &Type) -> Option<&Type> {
    generic_args(ty, "Option").filter(|a| a.len() == 1).map(|a| a[0])
}

/// `T` when `ty` is `Result<T, E>` (or an alias `Result<T>`, like `std::io::Result<T>`).
pub fn result_inner(ty: &Type) -> Option<&Type> {
    generic_args(ty, "Result").filter(|a| !a.is_empty() && a.len() <= 2).map(|a| a[0])
}

/// The path the expansion names the runtime by: `crate = some_crate` (the crate `agentic` or one of its
/// parts: `agentic_engine` for `#[agent]` functions, `agentic_planners` for `#[agents]` traits), by default
/// `::agentic`.
pub fn krate(args: &Args) -> syn::Result<TokenStream> {
    Ok(match args.path("crate")? {
        Some(path) if path.leading_colon.is_none() && path.segments.len() == 1 && path.segments[0].ident != "crate" => {
            quote!(::#path)
        }
        Some(path) => quote!(#path),
        None => quote!(::agentic),
    })
}

/// The first paragraph of the doc comment in `attrs`, on one line (empty without one).
pub fn doc_summary(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) = &nv.value
        {
            let line = s.value().trim().to_string();
            if line.is_empty() {
                if !lines.is_empty() {
                    break;
                }
                continue;
            }
            lines.push(line);
        }
    }
    lines.join(" ")
}

/// The state key of a parameter: its `#[key("..")]` attribute (the original's `@V("..")`), else its name
/// (without `r#`). The attribute is removed from `attrs`.
pub fn param_key(attrs: &mut Vec<Attribute>, ident: &syn::Ident) -> syn::Result<String> {
    let mut key = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("key")) {
        let lit: syn::LitStr = attr.parse_args().map_err(|e| {
            syn::Error::new(e.span(), format!("`#[key(\"..\")]` on `{ident}` names the state key it reads"))
        })?;
        key = Some(lit.value());
    }
    attrs.retain(|a| !a.path().is_ident("key"));
    let name = ident.to_string();
    Ok(key.unwrap_or_else(|| name.strip_prefix("r#").unwrap_or(&name).to_string()))
}
