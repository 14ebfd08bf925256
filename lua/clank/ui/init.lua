-- clank.ui: elements and rendering, views, the agent surface and forms (SPEC §8-§10).
local element = require "clank.ui.element"
local render = require "clank.ui.render"
local view = require "clank.ui.view"
local surface = require "clank.ui.surface"
local form = require "clank.ui.form"

return {
  h = element.h,
  raw = element.raw,
  isElement = element.isElement,
  render = render.render,
  escape = render.escape,
  defineView = view.defineView,
  mount = view.mount,
  createAgentSurface = surface.createAgentSurface,
  createForm = form.createForm,
}
