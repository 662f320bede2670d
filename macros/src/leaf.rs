//! `#[agent]` on an async function: a non-AI agent whose inputs are the parameters and whose output is the
//! return value.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

use crate::args::{Args, error};
use crate::types::{doc_summary, option_inner, param_key, result_inner};

/// The keys `#[agent]` takes on a function.
const KEYS: &[&str] = &["output_key", "description", "name", "optional", "asynchronous", "timeout_ms", "crate"];

/// Expands `#[agent(..)]` on `item`.
pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut func: ItemFn = syn::parse2(item).map_err(|e| {
        error(e.span(), "`#[agent]` goes on an `async fn` (or, inside an `#[agents]` trait, on a method)")
    })?;
    let args = Args::parse("agent", Span::call_site(), attr)?;
    args.only(KEYS)?;
    let fn_name = &func.sig.ident;
    let at = |span: Span, message: String| error(span, format!("`#[agent]` on `{fn_name}`: {message}"));
    if let Some(receiver) = func.sig.receiver() {
        return Err(at(receiver.span(), "an agent function takes no `self`".to_string()));
    }
    if !func.sig.generics.params.is_empty() {
        return Err(at(func.sig.generics.span(), "an agent function cannot be generic".to_string()));
    }
    let krate = crate::types::krate(&args)?;
    let private = quote!(#krate::__private);
    let name = args.string("name")?.map(|s| s.value()).unwrap_or_else(|| fn_name.to_string());
    let description = match args.string("description")? {
        Some(d) => d.value(),
        None => doc_summary(&func.attrs),
    };

    // The parameters: each one an input named after it, read from the state.
    let mut inputs = Vec::new();
    let mut reads = Vec::new();
    let mut call_args = Vec::new();
    for (i, arg) in func.sig.inputs.iter_mut().enumerate() {
        let FnArg::Typed(pat) = arg else { continue };
        let Pat::Ident(ident) = &*pat.pat else {
            return Err(at(pat.pat.span(), "a parameter must be a plain name: it names the state key".to_string()));
        };
        let key = param_key(&mut pat.attrs, &ident.ident)?;
        let ty = &*pat.ty;
        let spec_var = format_ident!("__input_{}", i);
        let read_var = format_ident!("__read_{}", i);
        let value_var = format_ident!("__value_{}", i);
        // An `Option<T>` parameter is an optional input declared as `T`.
        inputs.push(match option_inner(ty) {
            Some(inner) => quote_spanned! {inner.span()=>
                let (#spec_var, #read_var) = #private::declared_optional_input::<#inner>(#key);
            },
            None => quote_spanned! {ty.span()=>
                let (#spec_var, #read_var) = #private::declared_input::<#ty>(#key);
            },
        });
        reads.push(quote! { let #value_var: #ty = #read_var(ctx, #key)?; });
        call_args.push(quote!(#value_var));
    }
    let input_specs: Vec<_> = (0..inputs.len()).map(|i| format_ident!("__input_{}", i)).collect();

    // The return type: `T`, `Result<T, E>` or nothing.
    let (output_ty, fallible) = match &func.sig.output {
        ReturnType::Default => (None, false),
        ReturnType::Type(_, ty) => match result_inner(ty) {
            Some(inner) => (Some(inner.clone()), true),
            None => (Some((**ty).clone()), false),
        },
    };
    let output_ty = output_ty.filter(|t| !matches!(t, Type::Tuple(t) if t.elems.is_empty()));
    let output_key = args.string("output_key")?;
    let await_call = if func.sig.asyncness.is_some() { quote!(.await) } else { quote!() };
    let unwrap_result = if fallible {
        quote! { let __result = __result.map_err(|e| ctx.fail(e.to_string()))?; }
    } else {
        quote!()
    };
    let (declare_output, produce) = match (&output_ty, &output_key) {
        (Some(ty), Some(key)) => (
            {
                // `Option<T>`: `None` writes nothing; the key is declared as `T`.
                let declare = match option_inner(ty) {
                    Some(inner) => quote_spanned!(inner.span()=> #private::declared_optional_output::<#inner>(#key)),
                    None => quote_spanned!(ty.span()=> #private::declared_output::<#ty>(#key)),
                };
                quote! {
                let (__output, __write) = #declare;
                __spec.output_key = Some(__output.key);
                if let Some(value_type) = __output.value_type { __spec.output_type = value_type; }
                __spec.output_rust_type = __output.rust_type;
                }
            },
            quote! { __write(ctx, &__result) },
        ),
        (Some(ty), None) => {
            return Err(at(
                ty.span(),
                format!(
                    "missing `output_key = \"..\"`: the state key the result of `{fn_name}` is written to \
                     (or return nothing)"
                ),
            ));
        }
        (None, key) => {
            let set_key = key.as_ref().map(|k| quote!(__spec.output_key = Some(#k.to_string());));
            (quote!(#set_key), quote! { let () = __result; Ok(#private::Value::Null) })
        }
    };
    let optional = args.flag("optional")?;
    let asynchronous = args.flag("asynchronous")?;
    let timeout =
        args.int("timeout_ms")?.map(|t| quote!(__spec.timeout = Some(::std::time::Duration::from_millis(#t));));

    let vis = &func.vis;
    let agent_fn = format_ident!("{}_agent", fn_name);
    let doc = format!(
        "The agent of [`{fn_name}`] (`#[agent]`): named `{name}`, reads its parameters from the state, writes \
         its result{}.",
        output_key.as_ref().map(|k| format!(" to `{}`", k.value())).unwrap_or_default()
    );
    // The function stays as written: callable directly, and what the agent calls.
    func.attrs.retain(|a| !a.path().is_ident("agent"));
    Ok(quote! {
        #func

        #[doc = #doc]
        #vis fn #agent_fn() -> #private::AgentRef {
            let mut __spec = #private::AgentSpec::new(#name, "closure");
            __spec.description = #description.to_string();
            #(#inputs)*
            __spec.inputs = vec![#(#input_specs),*];
            #declare_output
            __spec.optional = #optional;
            __spec.is_async = #asynchronous;
            #timeout
            #private::fn_agent(__spec, move |ctx| {
                ::std::boxed::Box::pin(async move {
                    #(#reads)*
                    let __result = #fn_name(#(#call_args),*)#await_call;
                    #unwrap_result
                    #produce
                })
            })
        }
    })
}
