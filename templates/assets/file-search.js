/*
 * file-search.js: keeps MkDocs search working (Material) or quiet (built-in theme) when the
 * site is opened from file://. Does nothing over HTTP.
 *
 * Browsers refuse `new Worker(url)` for file:// pages, and Material runs its search in a Web
 * Worker. Material already loads the index as a script on file:// (search/search_index.js,
 * written by reportgen's build). What is missing is the Worker: this file replaces it, on
 * file:// only, with a stand-in that runs the worker script in a hidden same-origin iframe and
 * relays messages in both directions (the idea of the iframe-worker polyfill, written here so
 * that nothing is fetched from a CDN). Material's search worker needs only addEventListener
 * ("message") and postMessage; it does not call importScripts for English.
 *
 * The built-in "mkdocs" theme's search worker also fetches its index with XMLHttpRequest, which
 * file:// forbids: with that theme, search is hidden on file:// (class rg-no-search on <html>).
 */
(function () {
  "use strict";

  if (window.location.protocol !== "file:") {
    return;
  }
  /* The built-in theme defines these globals before its extra scripts; Material does not. */
  var material = !(typeof window.base_url === "string" && typeof window.shortcuts === "object");

  if (!material || typeof window.EventTarget !== "function") {
    document.documentElement.classList.add("rg-no-search");
    /* A Worker that never answers: the theme's search code starts without errors. */
    window.Worker = function SilentWorker() {
      this.postMessage = function () {};
      this.terminate = function () {};
      this.addEventListener = function () {};
      this.removeEventListener = function () {};
    };
    return;
  }

  function IframeWorker(url) {
    var target = new EventTarget();
    var frame = document.createElement("iframe");
    var queue = [];
    var ready = false;

    frame.hidden = true;
    frame.setAttribute("aria-hidden", "true");
    frame.setAttribute("tabindex", "-1");
    frame.title = "search worker";
    (document.body || document.documentElement).appendChild(frame);

    var inner = frame.contentWindow;
    /* The worker script's global postMessage(): deliver to this Worker's listeners. */
    inner.postMessage = function (data) {
      window.setTimeout(function () {
        var event = new MessageEvent("message", {data: data});
        if (typeof target.onmessage === "function") {
          target.onmessage(event);
        }
        target.dispatchEvent(event);
      }, 0);
    };

    function deliver(data) {
      inner.dispatchEvent(new inner.MessageEvent("message", {data: data}));
    }

    var code = inner.document.createElement("script");
    code.src = new URL(String(url), window.location.href).href;
    code.onload = function () {
      ready = true;
      queue.splice(0).forEach(deliver);
    };
    code.onerror = function () {
      target.dispatchEvent(new Event("error"));
    };
    (inner.document.head || inner.document.documentElement).appendChild(code);

    target.postMessage = function (data) {
      if (ready) {
        window.setTimeout(function () { deliver(data); }, 0);
      } else {
        queue.push(data);
      }
    };
    target.terminate = function () {
      frame.remove();
    };
    return target;
  }

  window.Worker = IframeWorker;
})();
