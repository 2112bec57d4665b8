// Bulk offboarding: a chosen text file fills the list field, where it can be checked before the
// preview. Without script the list is pasted instead.
'use strict';
for (const input of document.querySelectorAll('input[type="file"][data-fills]')) {
  input.addEventListener('change', async () => {
    const target = document.getElementById(input.dataset.fills);
    const file = input.files && input.files[0];
    if (!target || !file || file.size > 2 * 1024 * 1024) return;
    target.value = await file.text();
    target.focus();
  });
}
