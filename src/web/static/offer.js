// The passkey offered after a password sign-in. Where the browser can create a passkey
// conditionally (its password manager just filled the password), it is asked to at once, without
// a dialog; the buttons stay for every other browser: create one now, or not now.
(function () {
  'use strict';
  var form = document.getElementById('offer-form');
  var lib = window.SimpleWebAuthnBrowser;
  if (!form || !lib || !lib.browserSupportsWebAuthn()) return;
  var button = document.getElementById('offer-button');
  var status = document.getElementById('offer-status');
  var submitted = false;
  button.hidden = false;

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

  function register(conditional) {
    return options()
      .then(function (optionsJSON) {
        return lib.startRegistration({ optionsJSON: optionsJSON, useAutoRegister: conditional });
      })
      .then(function (result) {
        if (submitted) return;
        submitted = true;
        form.elements.response.value = JSON.stringify(result);
        form.submit();
      });
  }

  button.addEventListener('click', function () {
    button.disabled = true;
    status.textContent = form.dataset.msgWorking;
    register(false).catch(function () {
      status.textContent = form.dataset.msgCancelled;
      button.disabled = false;
    });
  });

  var PKC = window.PublicKeyCredential;
  if (PKC && typeof PKC.getClientCapabilities === 'function') {
    PKC.getClientCapabilities()
      .then(function (capabilities) {
        // A conditional request that the browser declines (or that a click on the button
        // aborts) ends quietly: the buttons are still there.
        if (capabilities && capabilities.conditionalCreate) return register(true);
      })
      .catch(function () {});
  }
})();
