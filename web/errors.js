// Collects console errors and uncaught exceptions into window.__errors before any module runs,
// so the browser tests (tests/ui.rs) can read them back. A classic script: it runs first.
window.__errors = [];
(() => {
  const origError = console.error;
  console.error = (...args) => { window.__errors.push(args.map(String).join(' ')); origError(...args); };
  window.addEventListener('error', (e) => window.__errors.push(String(e.message)));
  window.addEventListener('unhandledrejection', (e) => window.__errors.push(String(e.reason)));
  document.addEventListener('securitypolicyviolation', (e) => window.__errors.push(`CSP: ${e.violatedDirective} ${e.blockedURI}`));
})();
