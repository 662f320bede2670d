//! The arguments of the attributes: `key = "text"`, `key = 3`, `key = path`, `flag`, `key(a, b)`, parsed
//! once into a list that each attribute takes its keys from, so an unknown or repeated key is an error naming
//! the attribute.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, LitStr, Meta, Path, Token};

/// The arguments of one attribute, by key, with the attribute's name for messages.
pub struct Args {
    /// `#[sequence]`, for messages.
    pub attr: String,
    /// Where the attribute is (errors about what it lacks point there).
    pub span: Span,
    items: Vec<(String, Meta)>,
}

/// An error at `span` whose message starts with the attribute (`` `#[agent]` on `f`: ... ``).
pub fn error(span: Span, message: impl std::fmt::Display) -> syn::Error {
    syn::Error::new(span, message.to_string())
}

impl Args {
    /// Parses `tokens` (what is between the attribute's parentheses) for attribute `attr`.
    pub fn parse(attr: &str, span: Span, tokens: TokenStream) -> syn::Result<Args> {
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens)?;
        let mut items: Vec<(String, Meta)> = Vec::new();
        for meta in metas {
            let key = meta.path().get_ident().map(ToString::to_string).unwrap_or_else(|| {
                meta.path().segments.iter().map(|s| s.ident.to_string()).collect::<Vec<_>>().join("::")
            });
            // `branch(..)`, `desire(..)` and `prefer(..)` repeat; every other key is given once.
            if !["branch", "desire", "prefer"].contains(&key.as_str()) && items.iter().any(|(k, _)| *k == key) {
                return Err(error(meta.span(), format!("`#[{attr}]`: `{key}` is given twice")));
            }
            items.push((key, meta));
        }
        Ok(Args { attr: attr.to_string(), span, items })
    }

    /// The parsed arguments of a `#[name(..)]` attribute (or of a bare `#[name]`).
    pub fn of_attribute(attr: &syn::Attribute) -> syn::Result<Args> {
        let name = attr.path().get_ident().map(ToString::to_string).unwrap_or_default();
        match &attr.meta {
            Meta::Path(_) => Ok(Args { attr: name, span: attr.path().span(), items: Vec::new() }),
            Meta::List(list) => Args::parse(&name, attr.path().span(), list.tokens.clone()),
            Meta::NameValue(nv) => Err(error(nv.span(), format!("`#[{name}]` takes `#[{name}(key = value, ..)]`"))),
        }
    }

    /// Fails on the first key not among `known`, listing them.
    pub fn only(&self, known: &[&str]) -> syn::Result<()> {
        for (key, meta) in &self.items {
            if !known.contains(&key.as_str()) {
                let attr = &self.attr;
                let list = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
                return Err(error(meta.span(), format!("`#[{attr}]`: unknown argument `{key}` (expected {list})")));
            }
        }
        Ok(())
    }

    /// The argument `key`, as written.
    pub fn get_meta(&self, key: &str) -> Option<&Meta> {
        self.get(key)
    }

    fn get(&self, key: &str) -> Option<&Meta> {
        self.items.iter().find(|(k, _)| k == key).map(|(_, m)| m)
    }

    /// Every `key(..)` argument (for repeated keys like `branch`).
    pub fn all(&self, key: &str) -> impl Iterator<Item = &Meta> {
        self.items.iter().filter(move |(k, _)| k == key).map(|(_, m)| m)
    }

    fn value<'a>(&self, key: &str, meta: &'a Meta, what: &str) -> syn::Result<&'a Expr> {
        match meta {
            Meta::NameValue(nv) => Ok(&nv.value),
            _ => Err(error(meta.span(), format!("`#[{}]`: `{key}` takes {what}: `{key} = ..`", self.attr))),
        }
    }

    /// `key = "text"`, if given.
    pub fn string(&self, key: &str) -> syn::Result<Option<LitStr>> {
        let Some(meta) = self.get(key) else { return Ok(None) };
        match self.value(key, meta, "a string")? {
            Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Ok(Some(s.clone())),
            other => Err(error(other.span(), format!("`#[{}]`: `{key}` takes a string: `{key} = \"..\"`", self.attr))),
        }
    }

    /// `key = "text"` or `key = SOME_CONST` (a path to a `&str`), if given, as an expression.
    pub fn text(&self, key: &str) -> syn::Result<Option<TokenStream>> {
        let Some(meta) = self.get(key) else { return Ok(None) };
        match self.value(key, meta, "a string")? {
            Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Ok(Some(quote::quote!(#s))),
            Expr::Path(p) => Ok(Some(quote::quote!(#p))),
            other => Err(error(
                other.span(),
                format!("`#[{}]`: `{key}` takes a string or a constant: `{key} = \"..\"`", self.attr),
            )),
        }
    }

    /// `key = <integer>`, if given.
    pub fn int(&self, key: &str) -> syn::Result<Option<syn::LitInt>> {
        let Some(meta) = self.get(key) else { return Ok(None) };
        match self.value(key, meta, "an integer")? {
            Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => Ok(Some(i.clone())),
            other => Err(error(other.span(), format!("`#[{}]`: `{key}` takes an integer", self.attr))),
        }
    }

    /// `key = <number>`, if given (an integer literal is accepted).
    pub fn float(&self, key: &str) -> syn::Result<Option<TokenStream>> {
        let Some(meta) = self.get(key) else { return Ok(None) };
        match self.value(key, meta, "a number")? {
            Expr::Lit(ExprLit { lit: Lit::Float(f), .. }) => Ok(Some(quote::quote!(#f))),
            Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => {
                let f = syn::LitFloat::new(&format!("{}.0", i.base10_digits()), i.span());
                Ok(Some(quote::quote!(#f)))
            }
            other => Err(error(other.span(), format!("`#[{}]`: `{key}` takes a number", self.attr))),
        }
    }

    /// `flag`, `flag = true` or `flag = false` (absent: false).
    pub fn flag(&self, key: &str) -> syn::Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(Meta::Path(_)) => Ok(true),
            Some(meta) => match self.value(key, meta, "a boolean")? {
                Expr::Lit(ExprLit { lit: Lit::Bool(b), .. }) => Ok(b.value),
                other => Err(error(other.span(), format!("`#[{}]`: `{key}` takes `true` or `false`", self.attr))),
            },
        }
    }

    /// `key = some::path`, if given.
    pub fn path(&self, key: &str) -> syn::Result<Option<Path>> {
        let Some(meta) = self.get(key) else { return Ok(None) };
        match self.value(key, meta, "a path")? {
            Expr::Path(p) => Ok(Some(p.path.clone())),
            other => Err(error(other.span(), format!("`#[{}]`: `{key}` takes a function's path", self.attr))),
        }
    }

    /// `key("a", "b", ..)`, if given: the state keys listed.
    pub fn strings(&self, key: &str) -> syn::Result<Option<Vec<LitStr>>> {
        let Some(meta) = self.get(key) else { return Ok(None) };
        strings_of(&self.attr, key, meta).map(Some)
    }

    /// `key(a, b::c, ..)`, if given: the paths listed.
    pub fn paths(&self, key: &str) -> syn::Result<Option<Vec<Path>>> {
        let Some(meta) = self.get(key) else { return Ok(None) };
        paths_of(&self.attr, key, meta).map(Some)
    }
}

/// The paths listed in `key(a, b::c, ..)`.
pub fn paths_of(attr: &str, key: &str, meta: &Meta) -> syn::Result<Vec<Path>> {
    match meta {
        Meta::List(list) => {
            let paths = Punctuated::<Path, Token![,]>::parse_terminated.parse2(list.tokens.clone()).map_err(|e| {
                error(e.span(), format!("`#[{attr}]`: `{key}(..)` lists agents by name, like `{key}(a, self::f)`"))
            })?;
            Ok(paths.into_iter().collect())
        }
        _ => Err(error(meta.span(), format!("`#[{attr}]`: `{key}` lists agents: `{key}(a, b)`"))),
    }
}

/// The string literals listed in `key("a", "b", ..)` (state keys).
pub fn strings_of(attr: &str, key: &str, meta: &Meta) -> syn::Result<Vec<LitStr>> {
    match meta {
        Meta::List(list) => {
            let keys = Punctuated::<LitStr, Token![,]>::parse_terminated.parse2(list.tokens.clone()).map_err(|e| {
                error(
                    e.span(),
                    format!("`#[{attr}]`: `{key}(..)` lists state keys as strings, like `{key}(\"a\", \"b\")`"),
                )
            })?;
            Ok(keys.into_iter().collect())
        }
        _ => Err(error(meta.span(), format!("`#[{attr}]`: `{key}` lists state keys: `{key}(\"a\", \"b\")`"))),
    }
}
