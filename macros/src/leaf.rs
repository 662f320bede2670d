//! `#[agent]` on an async function: a non-AI agent whose inputs are the parameters and whose output is the
//! return value.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ItemFn, Pat, ReturnType, Type};

use crate::args::{Args, error};
use crate::types::{doc_summary, option_inner, param_key, result_inner};

/// The keys `#[agent]` takes on a function.
const KEYS: &[&str] = &[
    "output_key",
    "description",
    "name",
    "optional",
    "asynchronous",
    "timeout_ms",
    "crate",
    "inputs",
    "reply_only",
    "update",
];

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

    // `inputs("a", ..)`: the keys that activate the agent (default: every parameter).
    let listed: Option<Vec<String>> = args.strings("inputs")?.map(|keys| keys.iter().map(|k| k.value()).collect());

    // The parameters: each one an input named after it, read from the state; a `#[resource]` one is given
    // when the agent is built; one left out of `inputs(..)` is read from the state without activating it.
    let mut inputs = Vec::new();
    let mut input_specs = Vec::new();
    let mut reads = Vec::new();
    let mut call_args = Vec::new();
    let mut resources: Vec<(Ident, Type)> = Vec::new();
    let mut keys = Vec::new();
    for (i, arg) in func.sig.inputs.iter_mut().enumerate() {
        let FnArg::Typed(pat) = arg else { continue };
        let Pat::Ident(ident) = &*pat.pat else {
            return Err(at(pat.pat.span(), "a parameter must be a plain name: it names the state key".to_string()));
        };
        let ty = &*pat.ty;
        let value_var = format_ident!("__value_{}", i);
        if let Some(index) = pat.attrs.iter().position(|a| a.path().is_ident("resource")) {
            pat.attrs.remove(index);
            let ident = ident.ident.clone();
            reads.push(quote! { let #value_var: #ty = #ident; });
            call_args.push(quote!(#value_var));
            resources.push((ident, ty.clone()));
            continue;
        }
        let key = param_key(&mut pat.attrs, &ident.ident)?;
        let read_var = format_ident!("__read_{}", i);
        if listed.as_ref().is_some_and(|l| !l.contains(&key)) {
            inputs.push(quote_spanned! {ty.span()=> let #read_var = #private::declared_context::<#ty>(); });
        } else {
            let spec_var = format_ident!("__input_{}", i);
            // An `Option<T>` parameter is an optional input declared as `T`.
            inputs.push(match option_inner(ty) {
                Some(inner) => quote_spanned! {inner.span()=>
                    let (#spec_var, #read_var) = #private::declared_optional_input::<#inner>(#key);
                },
                None => quote_spanned! {ty.span()=>
                    let (#spec_var, #read_var) = #private::declared_input::<#ty>(#key);
                },
            });
            input_specs.push(quote!(#spec_var));
        }
        reads.push(quote! { let #value_var: #ty = #read_var(ctx, #key)?; });
        call_args.push(quote!(#value_var));
        keys.push(key);
    }
    // Listed keys that are no parameter activate the agent without being read.
    for key in listed.iter().flatten().filter(|k| !keys.contains(k)) {
        input_specs.push(quote!(#private::InputSpec::new(#key)));
    }

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
    let reply_only = args.flag("reply_only")?;
    let update = args.flag("update")?;
    if let (true, Some(key)) = (reply_only || update, &output_key) {
        let flag = if update { "update" } else { "reply_only" };
        return Err(at(
            key.span(),
            format!("`{flag}` and `output_key` exclude each other: `{flag}` writes no output key"),
        ));
    }
    if reply_only && update {
        return Err(at(args.span, "`reply_only` and `update` exclude each other".to_string()));
    }
    if (reply_only || update) && output_ty.is_none() {
        let flag = if update { "`update` writes the fields of the result" } else { "`reply_only` returns the result" };
        return Err(at(func.sig.span(), format!("{flag}: give the function a return type")));
    }
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
        (Some(ty), None) if update => (
            quote_spanned!(ty.span()=> let __write = #private::write_update::<#ty>;),
            quote! { __write(ctx, &__result).await },
        ),
        (Some(ty), None) if reply_only => {
            let declare = quote_spanned!(ty.span()=> let __write = #private::declared_reply::<#ty>(););
            (declare, quote! { __write(ctx, &__result) })
        }
        (Some(ty), None) => {
            return Err(at(
                ty.span(),
                format!(
                    "missing `output_key = \"..\"`: the state key the result of `{fn_name}` is written to \
                     (or `reply_only` to return it without writing the state, `update` to write its fields, or \
                     return nothing)"
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
    let agent_in_fn = format_ident!("{}_agent_in", fn_name);
    let resource_params = resources.iter().map(|(ident, ty)| quote!(#ident: #ty));
    let resource_clones = resources.iter().map(|(ident, _)| quote!(let #ident = ::std::clone::Clone::clone(&#ident);));
    let resource_gets = resources.iter().map(|(ident, ty)| {
        let param = ident.to_string();
        quote_spanned!(ty.span()=> #private::resource::<#ty>(__resources, #name, #param)?)
    });
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
        #vis fn #agent_fn(#(#resource_params),*) -> #private::AgentRef {
            let mut __spec = #private::AgentSpec::new(#name, "closure");
            __spec.description = #description.to_string();
            #(#inputs)*
            __spec.inputs = vec![#(#input_specs),*];
            #declare_output
            __spec.optional = #optional;
            __spec.is_async = #asynchronous;
            #timeout
            #private::fn_agent(__spec, move |ctx| {
                #(#resource_clones)*
                ::std::boxed::Box::pin(#private::leaf_body(async move {
                    #(#reads)*
                    let __result = #fn_name(#(#call_args),*)#await_call;
                    #unwrap_result
                    #produce
                }))
            })
        }

        /// The agent with its `#[resource]` parameters taken from `resources` (what an `#[agents]` trait
        /// naming this function as a sub-agent calls).
        #[doc(hidden)]
        #[allow(dead_code)]
        #vis fn #agent_in_fn(
            __resources: &#private::Resources,
        ) -> ::std::result::Result<#private::AgentRef, #private::BuildError> {
            let _ = __resources;
            ::std::result::Result::Ok(#agent_fn(#(#resource_gets),*))
        }
    })
}
