// Passkey sign-in: a button for a modal request, and passkey autofill on the username field.
// The assertion is submitted as an ordinary form post; the server answers with a redirect.
(function () {
  'use strict';
  var form = document.getElementById('passkey-form');
  var lib = window.SimpleWebAuthnBrowser;
  if (!form || !lib) return;
  var button = document.getElementById('passkey-button');
  var status = document.getElementById('passkey-status');
  if (!lib.browserSupportsWebAuthn()) {
    status.textContent = form.dataset.msgUnsupported;
    return;
  }
  button.hidden = false;
  var submitted = false;
  var PKC = window.PublicKeyCredential;

  function flag(target, name) {
    if (!target) return;
    var input = document.createElement('input');
    input.type = 'hidden';
    input.name = name;
    input.value = '1';
    target.appendChild(input);
  }
  // After every sign-in (passkey or password) of a user with passkeys, a browser with the Signal API
  // gets a short page that brings its credential manager up to date; a password sign-in in a browser
  // that can make passkeys may be offered one.
  var passwordForm = document.getElementById('password-form');
  if (PKC && typeof PKC.signalAllAcceptedCredentials === 'function') {
    flag(form, 'signals');
    flag(passwordForm, 'signals');
  }
  flag(passwordForm, 'webauthn');

  function options() {
    return fetch(form.dataset.options, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'x-csrf-token': form.dataset.csrf },
    }).then(function (res) {
      if (!res.ok) throw new Error('options ' + res.status);
      return res.json();
    });
  }

  function run(autofill) {
    return options()
      .then(function (optionsJSON) {
        return lib.startAuthentication({ optionsJSON: optionsJSON, useBrowserAutofill: autofill });
      })
      .then(function (result) {
        if (submitted) return;
        submitted = true;
        form.elements.response.value = JSON.stringify(result);
        form.submit();
      })
      .catch(function () {
        // An autofill request is aborted whenever the button starts a modal one: nothing to report.
        if (autofill) return;
        status.textContent = form.dataset.msgCancelled;
        button.disabled = false;
      });
  }

  button.addEventListener('click', function () {
    button.disabled = true;
    status.textContent = form.dataset.msgWorking;
    run(false);
  });

  lib.browserSupportsWebAuthnAutofill().then(function (supported) {
    if (supported) run(true);
  });
})();
