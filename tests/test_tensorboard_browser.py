"""TensorBoard on the suite's shared `trained_run`, in a real headless browser (Debian's
chromium through /usr/bin/chromedriver, the `browser` fixture of test_serve_browser): its
Scalars, Text, Images and HParams pages show the run's data, not "No data".

Needs `apt-get install chromium chromium-driver`; skips with the reason without them."""

import socket
import subprocess
import sys
import time

import httpx
import pytest

from test_serve_browser import fixture_browser  # pylint: disable=unused-import

# The text of every element without children, through the shadow roots TensorBoard's pages are
# built of, and the natural widths of the images shown.
_PAGE_CONTENT = """
function walk(node, found) {
  if (node.shadowRoot) walk(node.shadowRoot, found);
  for (const child of node.children || []) walk(child, found);
  if (node.tagName === 'IMG' && node.naturalWidth > 0) found.images.push(node.naturalWidth);
  if (node.nodeType === 1 && !['STYLE', 'SCRIPT'].includes(node.tagName)
      && node.children.length === 0 && node.innerText) found.text.push(node.innerText.trim());
  return found;
}
return walk(document.documentElement, {text: [], images: []});
"""


@pytest.fixture(name="board", scope="module")
def fixture_board(trained_run, tmp_path_factory):
  """The URL of a TensorBoard serving `trained_run`'s model dir (stopped after the module)."""
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  log = open(tmp_path_factory.mktemp("tensorboard") / "log.txt", "wb")  # pylint: disable=consider-using-with
  proc = subprocess.Popen([sys.executable, "-m", "tensorboard.main",
                           f"--logdir={trained_run.model_dir}", "--host=127.0.0.1",
                           f"--port={port}", "--load_fast=false"], stdout=log, stderr=log)
  url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 180
  try:
    while True:
      assert proc.poll() is None and time.monotonic() < deadline, "tensorboard did not start"
      try:
        if httpx.get(f"{url}/data/runs", timeout=5).json():
          break
      except (httpx.HTTPError, ValueError):
        pass
      time.sleep(0.5)
    yield url
  finally:
    proc.terminate()
    proc.wait(timeout=60)
    log.close()


@pytest.mark.parametrize("page, expected", [
    # The sections of the four groups; the charts of the first (the others render when
    # scrolled to).
    ("scalars", ["loss", "optimization", "quality", "speed", "loss/loss", "loss/perplexity",
                 "loss/best_loss"]),
    ("text", ["translations/dev", "source", "reference", "translation",
              "A group of men are loading cotton onto a truck"]),
    ("images", ["attention/encoder_self", "attention/decoder_self", "attention/encoder_decoder"]),
    ("hparams", ["model", "tiny", "parallel_text", "best dev loss", "test BLEU"]),
])
def test_each_page_shows_the_run(browser, board, page, expected):
  from selenium.webdriver.support.ui import WebDriverWait  # pylint: disable=import-outside-toplevel
  browser.set_window_size(1600, 1000)
  browser.get(f"{board}/#{page}")

  def shown(driver):
    content = driver.execute_script(_PAGE_CONTENT)
    images_ok = page != "images" or len(content["images"]) >= 3
    return content if images_ok and all(e in content["text"] for e in expected) else None

  try:
    content = WebDriverWait(browser, 120, poll_frequency=1).until(shown)
  except Exception as e:  # pylint: disable=broad-except
    text = browser.execute_script(_PAGE_CONTENT)["text"]
    raise AssertionError(f"{page}: expected {expected}; shown: {text[:200]}") from e
  assert not any("No " in t and "data" in t for t in content["text"]), content["text"][:50]
