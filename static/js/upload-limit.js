// A file over the server's limit (UPLOAD_MAX_BYTES, in the input's data-max-bytes) is refused here, before
// the browser spends minutes sending what the server would refuse anyway.
(function () {
  "use strict";

  function megabytes(size) {
    return (size / 1048576).toLocaleString(undefined, { maximumFractionDigits: 1 }) + " MB";
  }

  document.addEventListener("change", function (event) {
    const input = event.target;
    if (!input.matches("input[type=file][data-max-bytes]")) { return; }
    const limit = Number(input.dataset.maxBytes);
    const tooLarge = Array.from(input.files).find(function (file) { return file.size > limit; });
    input.setCustomValidity(tooLarge ? "This file is " + megabytes(tooLarge.size) + "; the limit is " + megabytes(limit) + "." : "");
    input.reportValidity();
  });
}());
