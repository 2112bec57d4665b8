// Passkey registration on the account page and on the recovery page: fetch options, create the
// credential, post it.
(function () {
  'use strict';
  var form = document.getElementById('register-form') || document.getElementById('recovery-form');
  var lib = window.SimpleWebAuthnBrowser;
  if (!form || !lib) return;
  var prefix = form.id.replace(/-form$/, '');
  var button = document.getElementById(prefix + '-button');
  var status = document.getElementById(prefix + '-status');
  if (!lib.browserSupportsWebAuthn()) {
    status.textContent = form.dataset.msgUnsupported;
    return;
  }
  button.hidden = false;
  button.addEventListener('click', function () {
    button.disabled = true;
    status.textContent = form.dataset.msgWorking;
    fetch(form.dataset.options, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'x-csrf-token': form.dataset.csrf },
    })
      .then(function (res) {
        // 401: signed out, or the last sign-in is too old; posting the form shows the sign-in page.
        if (res.status === 401) {
          form.submit();
          return new Promise(function () {});
        }
        if (!res.ok) throw new Error('options ' + res.status);
        return res.json();
      })
      .then(function (optionsJSON) {
        return lib.startRegistration({ optionsJSON: optionsJSON });
      })
      .then(function (result) {
        form.elements.response.value = JSON.stringify(result);
        form.submit();
      })
      .catch(function () {
        status.textContent = form.dataset.msgCancelled;
        button.disabled = false;
      });
  });
})();
