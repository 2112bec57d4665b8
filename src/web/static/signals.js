// The WebAuthn Signal API: tells the browser's credential manager what this service knows, so it
// stops offering passkeys that were deleted here and shows the user's current name. Every call is
// feature-detected and best effort; where the browser has none of them nothing happens.
(function () {
  'use strict';
  var el = document.getElementById('webauthn-signals');
  if (!el) return;
  var d = el.dataset;
  var PKC = window.PublicKeyCredential;
  var pending = [];

  function signal(name, argument) {
    if (!PKC || typeof PKC[name] !== 'function') return;
    try {
      pending.push(Promise.resolve(PKC[name](argument)).catch(function () {}));
    } catch (e) {
      // A signal the browser refuses changes nothing for the user.
    }
  }

  if (d.unknownCredential) signal('signalUnknownCredential', { rpId: d.rpId, credentialId: d.unknownCredential });
  if (d.userId && d.accepted !== undefined)
    signal('signalAllAcceptedCredentials', {
      rpId: d.rpId,
      userId: d.userId,
      allAcceptedCredentialIds: d.accepted ? d.accepted.split(',') : [],
    });
  if (d.userId && d.name)
    signal('signalCurrentUserDetails', { rpId: d.rpId, userId: d.userId, name: d.name, displayName: d.displayName });
  if (d.continue) {
    var gone = false;
    var go = function () {
      if (gone) return;
      gone = true;
      window.location.replace(d.continue);
    };
    Promise.all(pending).then(go, go);
    setTimeout(go, 2000);
  }
})();
